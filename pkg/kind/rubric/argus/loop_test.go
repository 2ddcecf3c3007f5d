package argus

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// step is one loop event: "pass", "fail:dim1,dim2", "gate" or "same" (unchanged).
type step string

func apply(s LoopState, st step, p LoopParams) (LoopState, Decision) {
	switch {
	case st == "pass":
		return s.Record(Verdict{AllPass: true, FailedDimensions: []string{}}, p)
	case strings.HasPrefix(string(st), "fail:"):
		return s.Record(Verdict{FailedDimensions: strings.Split(string(st)[5:], ",")}, p)
	case st == "gate":
		return s.GateFail(p)
	case st == "same":
		return s.Unchanged(p)
	}
	panic("bad step " + st)
}

func TestLoopSequences(t *testing.T) {
	t.Parallel()
	p := DefaultRubric().LoopParams()
	cases := []struct {
		name  string
		steps []step
		p     LoopParams
		// want is the decision after the last step.
		signoff, budget bool
		streak          int
		frozen, newly   []string
		fix             []string
	}{
		{name: "pass,pass signs off", steps: []step{"pass", "pass"}, signoff: true, streak: 2},
		{name: "one pass is not enough", steps: []step{"pass"}, streak: 1},
		{name: "fail resets the streak", steps: []step{"pass", "fail:typography", "pass"}, streak: 1},
		{name: "gate failure resets the streak", steps: []step{"pass", "gate", "pass"}, streak: 1},
		{name: "gate failure after one pass", steps: []step{"pass", "gate"}, streak: 0},
		{name: "unchanged after a pass is the second pass", steps: []step{"fail:hierarchy", "pass", "same"}, signoff: true, streak: 2},
		{name: "unchanged after a failure is not a pass", steps: []step{"fail:hierarchy", "same"}, streak: 0},
		{name: "unchanged at the start is not a pass", steps: []step{"same"}, streak: 0},
		{name: "fix dimensions are the failures", steps: []step{"fail:layout_spacing,typography"},
			fix: []string{"layout_spacing", "typography"}},
		{name: "two failures of one dimension: not frozen yet", steps: []step{"fail:layout_spacing", "fail:layout_spacing,typography"},
			fix: []string{"layout_spacing", "typography"}},
		{name: "third failure freezes and drops it from fix", steps: []step{"fail:layout_spacing", "fail:layout_spacing", "fail:layout_spacing,typography"},
			frozen: []string{"layout_spacing"}, newly: []string{"layout_spacing"}, fix: []string{"typography"}},
		{name: "attempts count across non-consecutive failures", steps: []step{"fail:layout_spacing", "pass", "fail:layout_spacing", "gate", "fail:layout_spacing,hierarchy"},
			frozen: []string{"layout_spacing"}, newly: []string{"layout_spacing"}, fix: []string{"hierarchy"}},
		{name: "newly frozen only on the step that froze it", steps: []step{"fail:a", "fail:a", "fail:a", "fail:a,b"},
			frozen: []string{"a"}, fix: []string{"b"}},
		{name: "a failure of only frozen dimensions resets the streak", steps: []step{"fail:a", "fail:a", "fail:a", "fail:a"},
			frozen: []string{"a"}, streak: 0},
		{name: "iteration budget reached", steps: []step{"fail:a", "fail:b", "gate"}, p: LoopParams{MaxIterations: 3},
			budget: true},
		{name: "budget not reached one step earlier", steps: []step{"fail:a", "fail:b"}, p: LoopParams{MaxIterations: 3}, fix: []string{"b"}},
		{name: "default budget is twelve", steps: []step{"gate", "gate", "gate", "gate", "gate", "gate", "gate", "gate", "gate", "gate", "gate", "gate"},
			budget: true},
		{name: "sign-off on the last allowed iteration reports both", steps: []step{"pass", "pass"}, p: LoopParams{MaxIterations: 2},
			signoff: true, budget: true, streak: 2},
		{name: "override required passes", steps: []step{"pass", "pass"}, p: LoopParams{RequiredPasses: 3}, streak: 2},
		{name: "override max attempts", steps: []step{"fail:a"}, p: LoopParams{MaxAttempts: 1}, frozen: []string{"a"}, newly: []string{"a"}, streak: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := p.Override(c.p)
			if err := params.Validate(); err != nil {
				t.Fatal(err)
			}
			s := NewLoopState("habits", "list/populated/light", SourceHuman)
			var d Decision
			for _, st := range c.steps {
				s, d = apply(s, st, params)
			}
			if d.ShouldSignoff != c.signoff || d.BudgetExhausted != c.budget || d.ConsecutivePasses != c.streak {
				t.Errorf("signoff %v budget %v streak %d", d.ShouldSignoff, d.BudgetExhausted, d.ConsecutivePasses)
			}
			if d.Iteration != len(c.steps) || s.Iteration != len(c.steps) {
				t.Errorf("iteration %d/%d, want %d", d.Iteration, s.Iteration, len(c.steps))
			}
			eq := func(what string, got, want []string) {
				if want == nil {
					want = []string{}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s %q, want %q", what, got, want)
				}
			}
			eq("frozen", d.Frozen, c.frozen)
			eq("newly_frozen", d.NewlyFrozen, c.newly)
			eq("fix_dimensions", d.FixDimensions, c.fix)
			if d.RequiredPasses != params.RequiredPasses || d.MaxIterations != params.MaxIterations {
				t.Errorf("params not echoed: %+v", d)
			}
		})
	}
}

// TestLoopStateIsAValue: operations never modify the state they were called on, so a
// state read from the key-value store can be retried against a fresh copy.
func TestLoopStateIsAValue(t *testing.T) {
	t.Parallel()
	p := DefaultLoopParams()
	s0 := NewLoopState("f", "t", "")
	s1, _ := s0.Record(Verdict{FailedDimensions: []string{"a"}}, p)
	s2, _ := s1.Record(Verdict{FailedDimensions: []string{"a"}, ReferenceSource: SourceCandidate}, p)
	s3, _ := s2.Record(Verdict{FailedDimensions: []string{"a"}}, p)
	if len(s0.Attempts) != 0 || s1.Attempts["a"] != 1 || s2.Attempts["a"] != 2 || len(s2.Frozen) != 0 || len(s3.Frozen) != 1 {
		t.Fatalf("aliasing: %+v %+v %+v %+v", s0, s1, s2, s3)
	}
	if s1.ReferenceSource != "" || s2.ReferenceSource != SourceCandidate {
		t.Errorf("reference source %q %q", s1.ReferenceSource, s2.ReferenceSource)
	}

	out, err := json.Marshal(s3)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"feature":"f","target":"t","iteration":3,"consecutive_passes":0,"attempts":{"a":3},"frozen":["a"],"reference_source":"candidate"}`
	if string(out) != want {
		t.Fatalf("state json %s", out)
	}
	var back LoopState
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, s3) {
		t.Fatalf("round trip %+v %v", back, err)
	}
	d := back.Decide(p)
	dj, _ := json.Marshal(d)
	for _, k := range []string{"should_signoff", "budget_exhausted", "consecutive_passes", "required_passes", "iteration", "max_iterations", "frozen", "newly_frozen", "fix_dimensions"} {
		if !strings.Contains(string(dj), `"`+k+`":`) {
			t.Errorf("decision json lacks %s: %s", k, dj)
		}
	}
	// A non-normalized verdict claiming failure without naming a dimension resets.
	s4, d4 := s3.Record(Verdict{AllPass: false}, p)
	if s4.ConsecutivePasses != 0 || d4.ShouldSignoff {
		t.Errorf("%+v", s4)
	}
	if err := (LoopParams{RequiredPasses: 0, MaxAttempts: 1, MaxIterations: 1}).Validate(); err == nil {
		t.Error("zero passes accepted")
	}
}

// TestLoopWithNormalizedVerdicts runs the loop the way the aggregator does: a judge
// claims a pass its scores do not support; normalization corrects it, so the loop
// does not sign off on the judge's word.
func TestLoopWithNormalizedVerdicts(t *testing.T) {
	t.Parallel()
	r := DefaultRubric()
	raw, err := ParseVerdict(editVerdict(t, func(m map[string]any) { m["all_pass"] = true; m["failed_dimensions"] = []any{} }))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NormalizeVerdict(*raw, r)
	if err != nil || !c.Disagreed {
		t.Fatal(c, err)
	}
	s := NewLoopState("habits", "list/populated/dark", SourceHuman)
	s, d := s.Record(c.Verdict, r.LoopParams())
	s, d = s.Record(c.Verdict, r.LoopParams())
	if d.ShouldSignoff || s.ConsecutivePasses != 0 || !reflect.DeepEqual(d.FixDimensions, []string{"layout_spacing"}) {
		t.Fatalf("%+v", d)
	}
}

// TestLoopFrozenDimensionKeepsFailing pins the seed's loop_state.py `record`, which
// freezing does not soften:
//
//	if verdict.Get("all_pass"):
//	    state["consecutive_passes"] += 1
//	else:
//	    state["consecutive_passes"] = 0
//	    ... attempts, freeze ...
//	fix_dimensions = [d for d in verdict.Get("failed_dimensions", []) if d not in state["frozen"]]
//
// "every verdict that is not all-pass resets the streak; frozen dimensions only leave
// the fix list". A view whose frozen dimension keeps failing runs out its budget
// (BLOCKED); one that signs off after a dimension froze is DONE_WITH_CONCERNS.
func TestLoopFrozenDimensionKeepsFailing(t *testing.T) {
	t.Parallel()
	p := DefaultLoopParams()
	cases := []struct {
		name    string
		steps   []step
		signoff bool
		budget  bool
		streak  int
		fix     []string
		result  ViewResult
		status  FeatureStatus
		reason  string
	}{
		{name: "frozen and still failing: streak stays 0 on every verdict",
			steps: []step{"fail:a", "fail:a", "fail:a", "fail:a", "fail:a"}, fix: []string{}, result: ViewInProgress, status: StatusInProgress},
		{name: "frozen and still failing until the budget: blocked, never signed off",
			steps:  []step{"fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a", "fail:a"},
			budget: true, fix: []string{}, result: ViewBudgetExhausted, status: StatusBlocked, reason: "iteration budget spent without two consecutive passes (frozen: a)"},
		{name: "frozen failing beside an unfrozen one: only the unfrozen one is fixed",
			steps: []step{"fail:a", "fail:a", "fail:a", "fail:a,b"}, fix: []string{"b"}, result: ViewInProgress, status: StatusInProgress},
		{name: "frozen, then two all-pass verdicts: signed off with a concern",
			steps: []step{"fail:a", "fail:a", "fail:a", "pass", "pass"}, signoff: true, streak: 2, fix: []string{}, result: ViewSignedOff, status: StatusDoneWithConcerns,
			reason: "dimension a frozen after its attempts ran out"},
		{name: "frozen, pass, frozen fails again: the streak resets",
			steps: []step{"fail:a", "fail:a", "fail:a", "pass", "fail:a"}, fix: []string{}, result: ViewInProgress, status: StatusInProgress},
		{name: "frozen, pass, unchanged confirm: signed off with a concern",
			steps: []step{"fail:a", "fail:a", "fail:a", "pass", "same"}, signoff: true, streak: 2, fix: []string{}, result: ViewSignedOff, status: StatusDoneWithConcerns,
			reason: "dimension a frozen after its attempts ran out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewLoopState("habits", "list/populated/light", SourceHuman)
			var d Decision
			for i, st := range c.steps {
				s, d = apply(s, st, p)
				if strings.HasPrefix(string(st), "fail:") && (s.ConsecutivePasses != 0 || d.ShouldSignoff) {
					t.Fatalf("step %d (%s): a verdict that is not all-pass left streak %d, signoff %v", i, st, s.ConsecutivePasses, d.ShouldSignoff)
				}
			}
			if d.ShouldSignoff != c.signoff || d.BudgetExhausted != c.budget || d.ConsecutivePasses != c.streak {
				t.Fatalf("signoff %v budget %v streak %d, want %v %v %d", d.ShouldSignoff, d.BudgetExhausted, d.ConsecutivePasses, c.signoff, c.budget, c.streak)
			}
			if !reflect.DeepEqual(d.FixDimensions, c.fix) || !reflect.DeepEqual(d.Frozen, []string{"a"}) {
				t.Fatalf("fix %q frozen %q", d.FixDimensions, d.Frozen)
			}
			// Where the view's loop ended, as the aggregator reads the decision: a
			// sign-off wins over a spent budget (the last allowed iteration passed).
			result := ViewInProgress
			switch {
			case d.ShouldSignoff:
				result = ViewSignedOff
			case d.BudgetExhausted:
				result = ViewBudgetExhausted
			}
			if result != c.result {
				t.Fatalf("view result %s, want %s", result, c.result)
			}
			rep := FoldFeatureStatus(FeatureInput{Views: []ViewOutcome{{View: "list/populated/light", Result: result, Frozen: d.Frozen}}})
			if rep.Status != c.status || !strings.Contains(strings.Join(rep.Reasons, "\n"), c.reason) {
				t.Fatalf("feature status %s, want %s (%q)", rep.Status, c.status, rep.Reasons)
			}
		})
	}
}
