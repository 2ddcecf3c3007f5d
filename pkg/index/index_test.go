package index

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestRoundTrip: entries come back whole and in batch order, whatever order they were
// added in, and the stored form is compressed.
func TestRoundTrip(t *testing.T) {
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
	j := &records.Job{ACID: "AC-1", Index: 4, Status: events.StatusBlocked, BlockReason: "gone",
		Spec: events.JobSpec{Kind: events.KindCritic, ACID: "AC-1", Criterion: "task"}, Calls: []records.Call{{Judge: "p/m"}}}
	e := Of(j)
	if e.ACID != "AC-1" || e.Index != 4 || e.Kind != "critic" || e.Reason != "gone" || e.Criterion != "task" || len(e.Calls) != 1 {
		t.Fatalf("%+v", e)
	}
}
