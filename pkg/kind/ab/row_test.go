package ab

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestRowRoundsAPanelsConfidence: a panel's combined confidence is a float mean
// ((0.8+0.9)/2 is 0.8500000000000001); the row people read shows it rounded, and says
// whether a swapped pair agreed. The decision keeps the exact value.
func TestRowRoundsAPanelsConfidence(t *testing.T) {
	votes := []float64{0.8, 0.9}
	mean := (votes[0] + votes[1]) / 2
	if mean == 0.85 {
		t.Fatal("the float mean came out exact: the test no longer shows the rounding")
	}
	yes := true
	j := &records.Job{ACID: acOursA, Status: events.StatusCompared, Spec: spec(acOursA, 0.75),
		Decided: &events.IterationDecided{Kind: events.KindAB, ACID: acOursA, Status: events.StatusCompared, Final: true,
			AB: &events.ABResult{LabelAssignment: "A=ours,B=reference", RawWinner: "A", Winner: "ours", Confidence: mean, Agreement: "2/3", Consistent: &yes}}}
	row := Kind{}.Row(j)
	if row.Confidence == nil || *row.Confidence != 0.85 {
		t.Fatalf("confidence %v, want 0.85", row.Confidence)
	}
	if row.Consistent == nil || !*row.Consistent || row.Agreement != "2/3" {
		t.Fatalf("row %+v", row)
	}
	if j.Decided.AB.Confidence != mean {
		t.Fatal("the decision's confidence changed")
	}
}
