package trials_test

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

func TestMajority(t *testing.T) {
	for _, c := range []struct {
		answers []string
		atLeast int
		answer  string
		forN    int
		agree   float64
		unsure  bool
	}{
		{[]string{"A", "A", "B", "A", "B"}, 0, "A", 3, 0.6, false},
		{[]string{"A", "A", "B", "A", "B"}, 4, "A", 3, 0.6, true},
		{[]string{"A", "B", "tie"}, 0, "A", 1, 1.0 / 3, true},
		{[]string{"B", "B"}, 0, "B", 2, 1, false},
		{[]string{"A", "B"}, 0, "A", 1, 0.5, true},
		{[]string{"", "", "A"}, 0, "A", 1, 1.0 / 3, true},
		{nil, 0, "", 0, 0, true},
	} {
		r := trials.Majority(c.answers, c.atLeast)
		if r.Answer != c.answer || r.For != c.forN || r.Agreement != c.agree || (r.Unsure != "") != c.unsure || len(r.Answers) != len(c.answers) {
			t.Errorf("Majority(%v, at_least %d) = %+v", c.answers, c.atLeast, r)
		}
	}
	r := trials.Majority([]string{"A", "A", "B", "A", "B"}, 4)
	if !strings.Contains(r.Unsure, "3 of 5") || !strings.Contains(r.Unsure, "needs 4 (at_least)") {
		t.Errorf("unsure reason %q", r.Unsure)
	}
}

func TestMedianAndAgreeing(t *testing.T) {
	if m := trials.Median([]float64{7, 3, 9}); m != 7 {
		t.Errorf("median %v", m)
	}
	if m := trials.Median([]float64{7, 3, 9, 8}); m != 7.5 {
		t.Errorf("median %v", m)
	}
	r := trials.Agreeing(trials.ReducerMedian, []string{"pass", "revise", "pass"}, "pass")
	if r.For != 2 || r.Agreement != 2.0/3 || trials.AllAgree(&r) {
		t.Errorf("agreeing %+v", r)
	}
}

func TestEscalate(t *testing.T) {
	low := 0.7
	rule := &events.Escalate{Confidence: &low, Flip: true, Disagreement: true}
	split := trials.Majority([]string{"A", "B", "A"}, 0)
	same := trials.Majority([]string{"A", "A", "A"}, 0)
	for _, c := range []struct {
		s    trials.Signals
		up   bool
		want string
	}{
		{trials.Signals{Confidence: 0.9, HasConfidence: true, Trials: &same}, false, ""},
		{trials.Signals{Confidence: 0.5, HasConfidence: true}, true, "confidence 0.50 below 0.70"},
		{trials.Signals{Confidence: 0.9, HasConfidence: true, Flip: true}, true, "the position swap flipped"},
		{trials.Signals{Confidence: 0.9, HasConfidence: true, Trials: &split}, true, "trials disagreed (agreement 0.67)"},
		{trials.Signals{Confidence: 0.1}, false, ""}, // no confidence to read
	} {
		up, why := trials.Escalate(rule, c.s)
		if up != c.up || why != c.want {
			t.Errorf("Escalate(%+v) = %v %q, want %v %q", c.s, up, why, c.up, c.want)
		}
	}
	if up, _ := trials.Escalate(nil, trials.Signals{Flip: true}); up {
		t.Error("a nil rule escalated")
	}
}

func TestUnsure(t *testing.T) {
	split := trials.Majority([]string{"A", "A", "B"}, 0)
	d := &events.IterationDecided{Trials: &split, Ladder: &events.LadderResult{Rungs: []string{"cheap", "strong"}, Decided: 1, Why: []string{"confidence 0.40 below 0.70"}}}
	why := trials.Unsure(d)
	if len(why) != 2 || !strings.Contains(why[0], "trial disagreement: 2 of 3") || why[1] != "escalated to strong: confidence 0.40 below 0.70" {
		t.Errorf("unsure %q", why)
	}
	same := trials.Majority([]string{"A", "A"}, 0)
	if why := trials.Unsure(&events.IterationDecided{Trials: &same}); len(why) != 0 {
		t.Errorf("agreeing trials unsure: %q", why)
	}
}
