package trust

import (
	"testing"
)

// TestJudgeOutcomesOverTrials: a judge asked five times is read by its trials' majority,
// not as a tie because its calls differ; without a majority it is a tie.
func TestJudgeOutcomesOverTrials(t *testing.T) {
	var js []Judgment
	for i, w := range []Winner{WinnerOurs, WinnerOurs, WinnerReference, WinnerOurs, WinnerReference} {
		js = append(js, Judgment{AC: "AC-1", Judge: "openai/m", Status: StatusOK, RawWinner: "A", Winner: w, Trial: i})
	}
	for i, w := range []Winner{WinnerOurs, WinnerReference} {
		js = append(js, Judgment{AC: "AC-2", Judge: "openai/m", Status: StatusOK, RawWinner: "A", Winner: w, Trial: i})
	}
	got := JudgeOutcomes(js)
	if len(got) != 1 || len(got[0].Items) != 2 || got[0].Items[0].Winner != WinnerOurs || got[0].Items[1].Winner != WinnerTie {
		t.Fatalf("outcomes %+v: want ours on AC-1 (3 of 5), a tie on AC-2 (1 of 2)", got)
	}
}
