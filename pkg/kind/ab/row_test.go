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
	t.Parallel()
	votes := []float64{0.8, 0.9}
	mean := (votes[0] + votes[1]) / 2
	if mean == 0.85 {
		t.Fatal("the float mean came out exact: the test no longer shows the rounding")
	}
	yes := true
	j := &records.Job{ACID: acOursA, Status: events.StatusCompared, Spec: spec(acOursA, 0.75),
		Decided: &events.IterationDecided{Kind: events.KindAB, ACID: acOursA, Status: events.StatusCompared, Final: true,
			KindPart: &Decided{LabelAssignment: "A=ours,B=reference", RawWinner: "A", Winner: "ours", Confidence: mean, Agreement: "2/3", Consistent: &yes}}}
	row := Kind{}.Row(j)
	if row.Confidence == nil || *row.Confidence != 0.85 {
		t.Fatalf("confidence %v, want 0.85", row.Confidence)
	}
	if row.Consistent == nil || !*row.Consistent || row.Agreement != "2/3" {
		t.Fatalf("row %+v", row)
	}
	if DecidedOf(j.Decided.KindPart).Confidence != mean {
		t.Fatal("the decision's confidence changed")
	}
}

// TestLegends: after un-blinding, the judge's words about slots come with which artifact
// each slot was: the row's legend follows the recorded assignment, a swapped call's
// legend the exchanged slots.
func TestLegends(t *testing.T) {
	t.Parallel()
	if got := (Assignment{A: Ours, B: Reference}).Legend(); got != "slot A was ours, slot B the reference" {
		t.Fatalf("legend %q", got)
	}
	if got := (Assignment{A: Reference, B: Ours}).Legend(); got != "slot A was the reference, slot B ours" {
		t.Fatalf("legend %q", got)
	}
	if got := (Assignment{}).Legend(); got != "" {
		t.Fatalf("an invalid assignment has legend %q", got)
	}
	j := &records.Job{ACID: acRefA, Status: events.StatusCompared, Spec: spec(acRefA, 0.75),
		Decided: &events.IterationDecided{Kind: events.KindAB, ACID: acRefA, Status: events.StatusCompared, Final: true,
			KindPart: &Decided{LabelAssignment: "A=reference,B=ours", RawWinner: "B", Winner: "ours", Confidence: 0.9, BiggestGap: "Slot A buries the fix."}}}
	if row := (Kind{}).Row(j); row.Slots != "slot A was the reference, slot B ours" || row.BiggestGap != "Slot A buries the fix." {
		t.Fatalf("row %+v", row)
	}
	if got := (Kind{}).SlotLegend(j, records.Call{Label: "AB"}); got != "slot A was the reference, slot B ours" {
		t.Fatalf("AB call legend %q", got)
	}
	if got := (Kind{}).SlotLegend(j, records.Call{Label: "BA"}); got != "slot A was ours, slot B the reference" {
		t.Fatalf("BA call legend %q", got)
	}
}
