package ab

// These tests FAIL against the code at the time of writing (see the test report).

import (
	"math"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Bug E: DeriveAB trusts a vote whose status says "ok" without re-validating the raw
// verdict, so an out-of-range confidence routes (1.7 for ours is a clean pass), an
// unknown raw winner is "compared" with an empty winner, and a NaN confidence is stored
// (the aggregator's JSON job record cannot even be written then). Invariant 2: the
// aggregator re-derives, it never trusts the judge's own claim.
func TestBugDeriveABRevalidatesOkVotes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    events.Vote
	}{
		{"confidence above 1", vote("m", "AB", "A", 1.7)},
		{"confidence below 0", vote("m", "AB", "B", -3)},
		{"confidence NaN", vote("m", "AB", "A", math.NaN())},
		{"raw winner not a slot", vote("m", "AB", "C", 0.9)},
		{"raw winner empty", vote("m", "AB", "", 0.9)},
		{"biggest gap empty", events.Vote{Judge: events.JudgeInfo{Provider: "p", Model: "m"}, Order: "AB", Status: "ok", RawWinner: "A", Confidence: 0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Derive(spec(acOursA, 0.75), 0, []events.Vote{tt.v})
			if d.Decided == nil || d.Decided.Status != events.StatusSchemaViolation {
				t.Fatalf("decided %+v; want schema_violation", d.Decided)
			}
			if d.Comparison.Status != StatusSchemaViolation || d.Comparison.Confidence != nil {
				t.Errorf("comparison %+v; want a schema violation without a confidence", d.Comparison)
			}
			if d.Decided.Disagreements == 0 {
				t.Errorf("Disagreements = 0; a corrected self-report must be counted")
			}
		})
	}
}

// Bug F (minor): DeriveAB panics on an empty vote list (index out of range) instead of
// reporting it; VerdictEmitted.Validate keeps it off the bus, but DeriveAB is documented
// as the auditor's replay function.
func TestBugDeriveABNoVotesDoesNotPanic(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Derive(no votes) panicked: %v", r)
		}
	}()
	d := Derive(spec(acOursA, 0.75), 0, nil)
	if d.Blocked == "" && (d.Decided == nil || d.Decided.Status == events.StatusCompared) {
		t.Errorf("no votes produced %+v; want blocked or a schema violation", d)
	}
}
