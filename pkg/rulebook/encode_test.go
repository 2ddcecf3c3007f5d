package rulebook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMarshalIndentIsMarshalIndent: the frugal encoder writes exactly what
// json.MarshalIndent writes (manifests are compared byte for byte with the ones stored),
// for awkward values and for random documents.
func TestMarshalIndentIsMarshalIndent(t *testing.T) {
	type row struct {
		ID    string          `json:"id"`
		Note  string          `json:"note,omitempty"`
		N     float64         `json:"n"`
		Tags  []string        `json:"tags"`
		Extra map[string]any  `json:"extra,omitempty"`
		Raw   json.RawMessage `json:"raw,omitempty"`
		Ptr   *int            `json:"ptr"`
	}
	values := []any{
		nil, 0, "", "a \"quoted\" {brace}, [bracket]: colon \\ backslash", "<html> & ünïcode \u2028",
		[]any{}, map[string]any{}, []any{[]any{}, map[string]any{}, []any{1, []any{2}}},
		row{ID: "AC-1", Tags: []string{}, Raw: json.RawMessage("{ \"spaced\" : [ 1 , 2 ] }")},
		[]row{{ID: "a", Note: "x,y:z", N: 0.75, Extra: map[string]any{"k": []any{}, "b": map[string]any{"c": nil}}}, {ID: "b"}},
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		values = append(values, randomValue(rnd, 4))
	}
	for i, v := range values {
		want, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalIndent(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d:\n%s\nwant\n%s", i, got, want)
		}
		if cap(got) != len(got) {
			t.Fatalf("value %d: buffer of %d for %d bytes", i, cap(got), len(got))
		}
		var compact []byte
		ref, err := hashIndented(v, func(b []byte) { compact = append(compact, b...) })
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(want)
		if ref.SHA256 != hex.EncodeToString(sum[:]) || ref.Size != int64(len(want)) {
			t.Fatalf("value %d: hashed %+v, want %x (%d bytes)", i, ref, sum, len(want))
		}
		var plain bytes.Buffer
		if err := json.Compact(&plain, want); err != nil || !bytes.Equal(bytes.TrimSpace(compact), plain.Bytes()) {
			t.Fatalf("value %d: compact %s, want %s (%v)", i, compact, plain.Bytes(), err)
		}
	}
}

func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(6); {
	case depth == 0 || k == 0:
		return []any{"s\"\\,:{}[]", 1.5, true, nil, "é"}[r.IntN(5)]
	case k < 3:
		out := make([]any, r.IntN(4))
		for i := range out {
			out[i] = randomValue(r, depth-1)
		}
		return out
	default:
		out := map[string]any{}
		for i := r.IntN(4); i > 0; i-- {
			out[fmt.Sprintf("k%d %s", i, strings.Repeat(":", r.IntN(2)))] = randomValue(r, depth-1)
		}
		return out
	}
}

// TestPackedLinksRoundTrip: a fold keeps links packed and gives them back as they were.
func TestPackedLinksRoundTrip(t *testing.T) {
	links := []string{
		"0123456789abcdef0123456789abcdef:" + strings.Repeat("ab", 32),
		"dlq-judge-x:" + strings.Repeat("cd", 32),
		"0123456789ABCDEF0123456789ABCDEF:" + strings.Repeat("ef", 32),
		"not a link",
	}
	var got []string
	eachLink(packLinks(links), func(l string) { got = append(got, l) })
	if strings.Join(got, "|") != strings.Join(links, "|") {
		t.Fatalf("%q, want %q", got, links)
	}
}
