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
	"time"
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
	type doc struct {
		ReviewID string         `json:"review_id"`
		At       time.Time      `json:"generated_at"`
		Rows     []row          `json:"rows"`
		None     []row          `json:"none"`
		Omitted  []row          `json:"omitted,omitempty"`
		Blob     []byte         `json:"blob"`
		Skipped  string         `json:"-"`
		Dash     string         `json:"-,"`
		hidden   string         // unexported: never encoded
		Extra    *row           `json:"extra,omitempty"`
		Meta     map[string]int `json:"meta"`
		Untagged bool
	}
	values := []any{
		&doc{ReviewID: "r", At: time.Date(2026, 12, 1, 9, 0, 0, 5, time.UTC), Rows: []row{{ID: "a"}, {ID: "b<c>", Tags: []string{}}}, Blob: []byte("x"),
			Skipped: "no", Dash: "yes", hidden: "no", Meta: map[string]int{"b": 2, "a": 1}},
		doc{Rows: []row{}}, &doc{Extra: &row{ID: "e"}, Omitted: []row{{ID: "o"}}},
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
		var compact bytes.Buffer
		ref, err := hashIndented(v, &compact)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(want)
		if ref.SHA256 != hex.EncodeToString(sum[:]) || ref.Size != int64(len(want)) {
			t.Fatalf("value %d: hashed %+v, want %x (%d bytes)", i, ref, sum, len(want))
		}
		var plain, got2 bytes.Buffer
		if err := json.Compact(&plain, want); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&got2, compact.Bytes()); err != nil || !bytes.Equal(got2.Bytes(), plain.Bytes()) {
			t.Fatalf("value %d: compact %s, want %s (%v)", i, compact.Bytes(), plain.Bytes(), err)
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
