package ab_test

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

func repeatedSpec(rep *events.Repeats) events.JobSpec {
	return events.JobSpec{Kind: events.KindAB, ACID: "AC-1", KindPart: &ab.Spec{Threshold: 0.75}, Repeats: rep}
}

func trialVotes(model string, rung int, raws ...string) []events.Vote {
	var vs []events.Vote
	for t, raw := range raws {
		conf := 0.9
		if strings.HasSuffix(raw, "?") {
			raw, conf = strings.TrimSuffix(raw, "?"), 0.4
		}
		vs = append(vs, events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: model}, Order: "AB", Status: events.VoteOK,
			RawWinner: raw, Confidence: conf, BiggestGap: "gap", Trial: t, Rung: rung})
	}
	return vs
}

// TestDeriveTrialsMajority: five trials answering A, A, B, A, B give A's winner, with
// every answer recorded and an agreement of 0.6.
func TestDeriveTrialsMajority(t *testing.T) {
	spec := repeatedSpec(&events.Repeats{Trials: 5})
	d := ab.Derive(spec, 0, trialVotes("m", 0, "A", "A", "B", "A", "B"))
	if d.Blocked != "" || d.Decided == nil || d.Decided.Trials == nil {
		t.Fatalf("decision %+v", d)
	}
	as := ab.Assign("AC-1", 0)
	tr := d.Decided.Trials
	if ab.DecidedOf(d.Decided.KindPart).Winner != string(ab.Unshuffle("A", as)) || tr.Agreement != 0.6 || len(tr.Answers) != 5 || tr.For != 3 || tr.Reducer != "majority" {
		t.Fatalf("winner %s, trials %+v", ab.DecidedOf(d.Decided.KindPart).Winner, tr)
	}
	if d.Comparison.Tribunal == nil || d.Comparison.Tribunal.Trials == nil {
		t.Error("the comparison does not record its trials")
	}
	// at_least 4 of 5: the AC is blocked with the reason, its trials still recorded.
	spec.Repeats.AtLeast = 4
	d = ab.Derive(spec, 0, trialVotes("m", 0, "A", "A", "B", "A", "B"))
	if !strings.Contains(d.Blocked, "3 of 5 trials, and it needs 4 (at_least)") || d.Decided == nil || d.Decided.Trials == nil {
		t.Fatalf("at_least 4: %+v", d)
	}
	// A missing trial blocks: the verdict is never reduced from fewer answers than asked.
	spec.Repeats.AtLeast = 0
	if d := ab.Derive(spec, 0, trialVotes("m", 0, "A", "A", "B", "A")); !strings.Contains(d.Blocked, "trial 5 of 5 has no recorded answer") {
		t.Fatalf("four of five trials: %+v", d)
	}
}

// TestDeriveLadder: the strong rung decides only where the cheap one was unsure, and the
// decision says which rung and why; a rung due and not asked blocks.
func TestDeriveLadder(t *testing.T) {
	low := 0.7
	spec := repeatedSpec(&events.Repeats{Ladder: []string{"cheap", "strong"}, Escalate: &events.Escalate{Confidence: &low}})
	d := ab.Derive(spec, 0, trialVotes("cheap", 0, "A"))
	if d.Blocked != "" || d.Decided.Ladder == nil || d.Decided.Ladder.Decided != 0 || d.Decided.Ladder.Why != nil {
		t.Fatalf("sure cheap: %+v", d.Decided)
	}
	if up, _ := ab.Escalates("AC-1", 0, spec.Repeats, trialVotes("cheap", 0, "A")); up {
		t.Error("the judge stage would escalate a sure answer")
	}
	unsure := trialVotes("cheap", 0, "A?")
	if up, why := ab.Escalates("AC-1", 0, spec.Repeats, unsure); !up || why != "confidence 0.40 below 0.70" {
		t.Errorf("escalates %v %q", up, why)
	}
	d = ab.Derive(spec, 0, append(unsure, trialVotes("strong", 1, "B")...))
	l := d.Decided.Ladder
	as := ab.Assign("AC-1", 0)
	if d.Blocked != "" || l.Decided != 1 || len(l.Why) != 1 || len(l.Answers) != 2 || ab.DecidedOf(d.Decided.KindPart).Winner != string(ab.Unshuffle("B", as)) {
		t.Fatalf("escalated: %+v %+v", ab.DecidedOf(d.Decided.KindPart), l)
	}
	if d := ab.Derive(spec, 0, unsure); !strings.Contains(d.Blocked, "rung 2 (strong) was due (confidence 0.40 below 0.70) and gave no answer") {
		t.Fatalf("strong rung missing: %+v", d)
	}
}

// TestEscalatesOnAFlip: a swap pair that flipped sends the AC up a ladder whose rule
// names flip, and a consistent one does not.
func TestEscalatesOnAFlip(t *testing.T) {
	rep := &events.Repeats{Ladder: []string{"cheap", "strong"}, Escalate: &events.Escalate{Flip: true}}
	pair := func(first, second string) []events.Vote {
		vs := trialVotes("cheap", 0, first, second)
		vs[1].Trial, vs[1].Order = 0, "BA"
		return vs
	}
	if up, why := ab.Escalates("AC-1", 0, rep, pair("A", "A")); !up || why != "the position swap flipped" {
		t.Errorf("flipped pair: %v %q", up, why)
	}
	if up, _ := ab.Escalates("AC-1", 0, rep, pair("A", "B")); up {
		t.Error("a consistent pair escalated")
	}
}
