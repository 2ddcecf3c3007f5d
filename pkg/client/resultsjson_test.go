package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// wholeJSON is what every --json output is: the value encoded whole.
func wholeJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestResultsWriteJSONIsTheWholeEncoding: the results written a row at a time are byte
// for byte the results encoded whole, for no rows, one, and many with nested fields,
// HTML and non-ASCII text, so a script reading `tribunal results --json` sees no change.
func TestResultsWriteJSONIsTheWholeEncoding(t *testing.T) {
	conf, q, yes, temp, seed := 0.75, 4, true, float32(0.2), 7
	many := make([]Row, 0, 50)
	for i := range 50 {
		r := Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", Status: "compared", Winner: "B"}
		switch i % 5 {
		case 1:
			r.Confidence, r.BiggestGap, r.Slots = &conf, `"A" <lacks> the & footer: café`, "A=old B=new"
		case 2:
			r.Kind, r.Verdict, r.Quality, r.Consistent = "critic", "pass", &q, &yes
		case 3:
			r.Status, r.Reason, r.Unsure = "blocked", "gate contrast failed:\n\tratio 2.1", []string{"x", "y\u2028"}
		case 4:
			r.Cost = &price.Sum{Priced: 2, CacheHits: 1}
			r.Sampling = []kind.JudgeSampling{{Judge: "scripted", Sampling: events.Sampling{Temperature: &temp, Seed: &seed, MaxTokens: 256}}}
			r.Trials = &events.TrialsResult{}
		}
		many = append(many, r)
	}
	head := Results{Tenant: "team-a", BatchID: "b-1", Source: "/tmp/batch <1>", Judges: []string{"scripted"},
		Revised: &records.Revision{}}
	for _, tc := range []struct {
		name string
		rows []Row
	}{
		{"nil rows", nil},
		{"no rows", []Row{}},
		{"one row", many[:1]},
		{"many rows", many},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := head
			r.Rows = tc.rows
			want := wholeJSON(t, &r)
			var got bytes.Buffer
			if err := r.WriteJSON(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("written a row at a time:\n%s\nencoded whole:\n%s", got.Bytes(), want)
			}
		})
	}
}

// TestResultsWriteJSONHoldsARowAtATime: writing the results allocates about one row's
// encoding at a time, not the encoding of all of them (which the whole encoder buffers,
// then indents into a second buffer).
func TestResultsWriteJSONHoldsARowAtATime(t *testing.T) {
	r := Results{Tenant: "t", BatchID: "b"}
	for i := range 20000 {
		r.Rows = append(r.Rows, Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", Status: "compared", Winner: "A",
			BiggestGap: "the new footer keeps the links the old one had, and adds the legal notice"})
	}
	var out countingWriter
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := r.WriteJSON(new(countingWriter)); err != nil {
				b.Fatal(err)
			}
		}
	})
	perRun := allocs.AllocedBytesPerOp()
	if perRun > int64(out)/4 {
		t.Fatalf("writing %d bytes of results allocated %d bytes: more than a quarter of the output is held", out, perRun)
	}
	t.Logf("%d bytes written, %d allocated (the whole encoder: about %d)", out, perRun, 3*int64(out))
}

// countingWriter counts what is written and keeps none of it.
type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
