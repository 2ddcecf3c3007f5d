package index

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestRoundTrip: entries come back whole and in batch order, whatever order they were
// added in, and the stored form is compressed.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	conf, yes := 0.8, true
	b := NewBuilder()
	for i := 2; i >= 0; i-- {
		b.Add(Entry{Row: kind.Row{ACID: "AC-" + string(rune('0'+i)), Kind: "ab", Status: "compared", Winner: "ours", Confidence: &conf, Consistent: &yes,
			BiggestGap: strings.Repeat("the gap ", 20), Judge: "openai/m"}, Index: i, Criterion: strings.Repeat("criterion ", 20),
			Calls: []records.Call{{Judge: "openai/m", Label: "AB", Status: events.VoteOK, PromptTokens: 900, LatencyMillis: 1500,
				Record: &events.Blob{SHA256: strings.Repeat("a", 64), MediaType: "application/json", Size: 3}}}})
	}
	data, err := b.Bytes()
	if err != nil || b.Len() != 3 {
		t.Fatal(err)
	}
	if len(data) > 1000 {
		t.Errorf("%d bytes for three repetitive entries: not compressed", len(data))
	}
	got, err := Decode(data)
	if err != nil || len(got) != 3 {
		t.Fatalf("%v %v", got, err)
	}
	for i, e := range got {
		if e.Index != i || e.Confidence == nil || *e.Confidence != 0.8 || e.Consistent == nil || !*e.Consistent || len(e.Calls) != 1 ||
			e.Calls[0].Record == nil || e.Calls[0].PromptTokens != 900 || e.Winner != "ours" || !strings.HasPrefix(e.Criterion, "criterion") {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if _, err := Decode([]byte("not gzip")); err == nil {
		t.Fatal("garbage decoded")
	}
}

// TestOf: a job's entry is its kind's row, its criterion and its calls.
func TestOf(t *testing.T) {
	t.Parallel()
	j := &records.Job{ACID: "AC-1", Index: 4, Status: events.StatusBlocked, BlockReason: "gone",
		Spec: events.JobSpec{Kind: events.KindCritic, ACID: "AC-1", Criterion: "task"}, Calls: []records.Call{{Judge: "p/m"}}}
	e := Of(j)
	if e.ACID != "AC-1" || e.Index != 4 || e.Kind != "critic" || e.Reason != "gone" || e.Criterion != "task" || len(e.Calls) != 1 {
		t.Fatalf("%+v", e)
	}
}

// TestEveryFieldRoundTrips sets every field of an entry (and of its calls) to a value of
// its own and reads it back: a field added to Entry, kind.Row or records.Call that the
// codec does not carry fails here.
func TestEveryFieldRoundTrips(t *testing.T) {
	t.Parallel()
	var e Entry
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				fill(v.Field(i))
			}
		case reflect.String:
			n++
			v.SetString(fmt.Sprintf("value-%d", n))
		case reflect.Int, reflect.Int64:
			n++
			v.SetInt(int64(n))
		case reflect.Float64, reflect.Float32:
			n++
			v.SetFloat(float64(n) + 0.25)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := 0; i < 2; i++ {
				fill(v.Index(i))
			}
		default:
			t.Fatalf("no filler for %s", v.Type())
		}
	}
	fill(reflect.ValueOf(&e).Elem())
	b := NewBuilder()
	b.Add(e)
	b.Add(Entry{Index: e.Index + 1})
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	if !reflect.DeepEqual(got[0], e) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got[0], e)
	}
	if !reflect.DeepEqual(got[1], Entry{Index: e.Index + 1}) {
		t.Fatalf("an empty entry came back as %+v", got[1])
	}
}

// TestCorruptIndex: damaged bytes are an error, never a panic or made-up entries.
func TestCorruptIndex(t *testing.T) {
	t.Parallel()
	b := NewBuilder()
	b.Add(Entry{Row: kind.Row{ACID: "AC-1", Kind: "ab"}, Calls: []records.Call{{Judge: "j"}}})
	good, _ := b.Bytes()
	for cut := 0; cut < len(good); cut++ {
		if _, err := Decode(good[:cut]); err == nil {
			t.Fatalf("a truncated chunked index (%d of %d bytes) decoded", cut, len(good))
		}
	}
	// The chunk is a v4 index.
	r := must(NewReader(bytes.NewReader(good), int64(len(good))))
	c := r.chunks[0]
	raw, _ := io.ReadAll(must(gzip.NewReader(bytes.NewReader(good[c.off : c.off+c.size]))))
	for cut := 1; cut < len(raw); cut++ {
		if _, err := decodeAll(raw[:cut]); err == nil {
			t.Fatalf("a truncated index (%d of %d bytes) decoded", cut, len(raw))
		}
	}
	flipped := append([]byte(nil), raw...)
	flipped[len(magic)+1] = 0xff
	if _, err := decodeAll(flipped); err == nil {
		t.Fatal("a damaged header decoded")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
