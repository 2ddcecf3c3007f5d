package bounds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// array32 is an array32 header claiming n elements.
func array32(n uint32) []byte {
	b := []byte{0xdd, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nested(depth int) any {
	var v any = "leaf"
	for range depth {
		v = []any{v}
	}
	return v
}

func TestMsgpack(t *testing.T) {
	lim := Limits{Depth: 4, Items: 8, Total: 12}
	for _, tc := range []struct {
		name  string
		data  []byte
		broke Limit
		path  string
		in    string
	}{
		{name: "scalar", data: mustMarshal(t, "x")},
		{name: "map with time and bin", data: mustMarshal(t, map[string]any{"t": time.Unix(1, 2), "b": []byte("xyz"), "n": 7})},
		{name: "nested at the limit", data: mustMarshal(t, nested(4))},
		{name: "five bytes claiming 4,294,967,295 elements", data: array32(0xffffffff), broke: Claim, in: "claims 4294967295 elements, 0 bytes follow"},
		{name: "ten million claimed, three there", data: append(array32(10_000_000), 1, 2, 3), broke: Claim, in: "claims 10000000 elements, 3 bytes follow"},
		{name: "map32 claim", data: []byte{0xdf, 0x7f, 0xff, 0xff, 0xff, 0xa1, 'k'}, broke: Claim, in: "claims 2147483647 pairs"},
		{name: "str32 claim", data: []byte{0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'}, broke: Claim, path: "[0]"},
		{name: "bin32 claim inside a map", data: append([]byte{0x81, 0xa4, 'd', 'a', 't', 'a', 0xc6}, 0x7f, 0xff, 0xff, 0xff), broke: Claim, path: "data"},
		{name: "too deep", data: mustMarshal(t, nested(5)), broke: Depth, path: "[0][0][0][0]", in: "nested 5 deep, at most 4"},
		{name: "too many items", data: mustMarshal(t, make([]int, 9)), broke: Items, in: "an array of 9 elements, at most 8"},
		{name: "too many in all", data: mustMarshal(t, [][]int{make([]int, 6), make([]int, 6)}), broke: Total, path: "[1]"},
		{name: "trailing bytes", data: append(mustMarshal(t, 1), 2), broke: Syntax, in: "1 bytes after the value"},
		{name: "empty", data: nil, broke: Syntax},
		{name: "no value", data: []byte{0xc1}, broke: Syntax, in: "0xc1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Msgpack(tc.data, lim)
			if tc.broke == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var be *Error
			if !errors.As(err, &be) || !errors.Is(err, ErrExceeded) {
				t.Fatalf("got %v, want a *Error", err)
			}
			if be.Broke != tc.broke || be.Path != tc.path || !strings.Contains(be.Reason, tc.in) {
				t.Errorf("got %+v (%v), want %s at %q with %q", be, err, tc.broke, tc.path, tc.in)
			}
		})
	}
}

// TestMsgpackAllocatesNothing holds the walk to zero allocations on a document that
// passes: it runs before every event is decoded.
func TestMsgpackAllocatesNothing(t *testing.T) {
	data := mustMarshal(t, map[string]any{"id": "x", "chain": []string{"a", "b"}, "data": map[string]any{"cases": []map[string]any{{"input": "i"}, {"input": "j"}}}})
	if n := testing.AllocsPerRun(100, func() {
		if err := Msgpack(data, Event); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per walk", n)
	}
}

func TestJSON(t *testing.T) {
	lim := Limits{Depth: 3, Items: 4, Total: 6}
	for _, tc := range []struct {
		name  string
		data  string
		broke Limit
		path  string
	}{
		{name: "object", data: `{"a": [1, 2], "b": {"c": null}}`},
		{name: "scalar", data: `"x"`},
		{name: "too deep", data: `[[[[1]]]]`, broke: Depth, path: "[0][0][0]"},
		{name: "too many items", data: `[1,2,3,4,5]`, broke: Items, path: "[4]"},
		{name: "too many in all", data: `{"a":[1,2,3],"b":[4,5]}`, broke: Total, path: "b[1]"},
		{name: "two values", data: `{} {}`, broke: Syntax},
		{name: "broken", data: `{"a": }`, broke: Syntax, path: "a"},
		{name: "empty", data: ``, broke: Syntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := JSON([]byte(tc.data), lim)
			if tc.broke == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("got %v, want a *Error", err)
			}
			if be.Broke != tc.broke || be.Path != tc.path {
				t.Errorf("got %+v (%v), want %s at %q", be, err, tc.broke, tc.path)
			}
		})
	}
}

// FuzzMsgpack holds the check's promise: whatever passes it, the msgpack decoder
// decodes into a generic value allocating in proportion to the input and the limits,
// never to a claim.
func FuzzMsgpack(f *testing.F) {
	f.Add(array32(0xffffffff))
	f.Add(append(array32(10_000_000), 1, 2, 3))
	f.Add(mustMarshalF(f, map[string]any{"a": []any{1, "x", []byte("y"), map[string]any{"z": nil}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if Msgpack(data, Event) != nil {
			return
		}
		var v any
		_ = msgpack.NewDecoder(bytes.NewReader(data)).Decode(&v)
	})
}

func mustMarshalF(f *testing.F, v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
