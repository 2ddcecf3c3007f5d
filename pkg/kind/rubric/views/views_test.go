package views

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func digest(c string) events.Blob {
	return events.Blob{SHA256: strings.Repeat(c, 64), MediaType: "application/json", Size: 1}
}

func spec(mode string) *rubricwire.Spec {
	ref := digest("f")
	pairs := digest("e")
	return &rubricwire.Spec{Feature: "f", Target: "t", State: "s", Appearance: "a", Route: "https://x", Adapter: "web", Mode: mode,
		ReferenceStatus: "present", ReferenceSource: "human", Reference: &ref, Pairs: &pairs,
		SpecJSON: digest("a"), SpecText: digest("b"), Tokens: digest("c"), Rubric: digest("d")}
}

func failing(dim string) *argus.Verdict {
	return &argus.Verdict{AllPass: false, FailedDimensions: []string{dim}}
}

var passing = &argus.Verdict{AllPass: true, FailedDimensions: []string{}}

// advanced is a view three iterations into its loop: typography failed twice, a pass.
func advanced(t *testing.T) Record {
	t.Helper()
	var v Record
	rs := spec(events.ModeHeadless)
	p := argus.DefaultLoopParams()
	render := digest("9")
	for _, verdict := range []*argus.Verdict{failing("typography"), failing("typography"), passing} {
		v.Apply("team-a", rs, verdict, false, &render, p, t0)
	}
	if v.Loop.Iteration != 3 || v.Loop.Attempts["typography"] != 2 || v.Loop.ConsecutivePasses != 1 {
		t.Fatalf("setup: %+v", v.Loop)
	}
	return v
}

// TestReportOnlyChangesNothingDurable pins the seed's report-only mode ("one dry
// iteration, no edits, no commits"; "report-only: run exactly ONE iteration and stop
// before any edit/commit"): a report-only step decides what the step would decide, but
// spends no iteration, attempt or budget of the view's loop and keeps its previous render
// and sign-off, however often it runs.
func TestReportOnlyChangesNothingDurable(t *testing.T) {
	t.Parallel()
	p := argus.DefaultLoopParams()
	for name, c := range map[string]struct {
		verdict   *argus.Verdict
		unchanged bool
		want      func(argus.Decision) bool
	}{
		"failing verdict": {verdict: failing("typography"), want: func(d argus.Decision) bool {
			// The third failure would freeze typography: the decision says so, the view does not.
			return d.Iteration == 4 && d.ConsecutivePasses == 0 && len(d.NewlyFrozen) == 1
		}},
		"passing verdict": {verdict: passing, want: func(d argus.Decision) bool { return d.Iteration == 4 && d.ShouldSignoff }},
		"red gates":       {want: func(d argus.Decision) bool { return d.Iteration == 4 && d.ConsecutivePasses == 0 }},
		"unchanged":       {unchanged: true, want: func(d argus.Decision) bool { return d.Iteration == 4 && d.ShouldSignoff }},
	} {
		t.Run(name, func(t *testing.T) {
			v := advanced(t)
			before := v.Clone()
			render := digest("8")
			for run := 0; run < 2; run++ {
				d, _ := v.Apply("team-a", spec(events.ModeReportOnly), c.verdict, c.unchanged, &render, p, t0.Add(time.Hour))
				if !c.want(d) {
					t.Fatalf("run %d: decision %+v", run, d)
				}
			}
			if !reflect.DeepEqual(v, before) {
				t.Fatalf("report-only changed the view:\n got %+v\nwant %+v", v, before)
			}
		})
	}
}

// TestChangedOriginStartsNewLoop: the seed's loop converges on a fixed target ("the spec
// is the immutable target"); a step planned from another spec.json, spec.md, tokens,
// contrast pairs, rubric or reference starts a new loop (nothing spent, no frozen
// dimension, no sign-off or snapshot baseline), and names what changed. The same origin
// continues the loop.
func TestChangedOriginStartsNewLoop(t *testing.T) {
	p := argus.DefaultLoopParams()
	render := digest("9")
	for _, c := range []struct {
		change func(*rubricwire.Spec)
		began  []string
	}{
		{func(*rubricwire.Spec) {}, nil},
		{func(rs *rubricwire.Spec) { rs.SpecJSON = digest("1") }, []string{"spec.json"}},
		{func(rs *rubricwire.Spec) { rs.SpecText = digest("1") }, []string{"spec.md"}},
		{func(rs *rubricwire.Spec) { rs.Tokens = digest("1") }, []string{"tokens.json"}},
		{func(rs *rubricwire.Spec) { rs.Pairs = nil }, []string{"contrast-pairs.json"}},
		{func(rs *rubricwire.Spec) { rs.Rubric = digest("1") }, []string{"rubric.json"}},
		{func(rs *rubricwire.Spec) { r := digest("1"); rs.Reference = &r }, []string{"reference"}},
		{func(rs *rubricwire.Spec) { rs.Rubric, rs.Tokens = digest("1"), digest("2") }, []string{"tokens.json", "rubric.json"}},
	} {
		t.Run(strings.Join(c.began, "+"), func(t *testing.T) {
			v := advanced(t)
			// A sign-off and a baseline of the old loop.
			v.Apply("team-a", spec(events.ModeHeadless), passing, true, &render, p, t0)
			if v.SignOff == nil || v.Baseline == nil {
				t.Fatal("setup: no sign-off")
			}
			rs := spec(events.ModeHeadless)
			c.change(rs)
			seen, changed := v.For(rs)
			if !reflect.DeepEqual(changed, c.began) {
				t.Fatalf("For names %v, want %v", changed, c.began)
			}
			d, began := v.Apply("team-a", rs, failing("hierarchy"), false, &render, p, t0)
			if c.began == nil {
				if v.Generation != 0 || d.Iteration != 5 || began != nil || v.Loop.Attempts["typography"] != 2 {
					t.Fatalf("same origin: generation %d, decision %+v, began %v", v.Generation, d, began)
				}
				return
			}
			if v.Generation != 1 || seen.Generation != 1 || d.Iteration != 1 || !reflect.DeepEqual(began, c.began) || !reflect.DeepEqual(v.Began, c.began) {
				t.Fatalf("generation %d (For saw %d), decision %+v, began %v", v.Generation, seen.Generation, d, began)
			}
			if len(v.Loop.Attempts) != 1 || v.SignOff != nil || v.Baseline != nil || seen.Baseline != nil || v.PrevRender == nil {
				t.Fatalf("new loop kept the old one's state: %+v", v)
			}
			if o := OriginOf(rs); *v.Origin != o {
				t.Fatalf("origin %+v, want %+v", *v.Origin, o)
			}
			// The next step continues the new loop.
			if d, began := v.Apply("team-a", rs, passing, false, &render, p, t0); d.Iteration != 2 || began != nil {
				t.Fatalf("second step of the new loop: %+v %v", d, began)
			}
		})
	}
	// A record kept before origins adopts the next step's origin: no loop starts over.
	v := advanced(t)
	v.Origin = nil
	if d, _ := v.Apply("team-a", spec(events.ModeHeadless), passing, false, &render, p, t0); d.Iteration != 4 || v.Generation != 0 || v.Origin == nil {
		t.Fatalf("legacy record: %+v, generation %d", d, v.Generation)
	}
}

// TestResetLoop: an operator's reset ends the loop it names and the next step starts a
// new one with a fresh budget; a reset of a loop already replaced, or of a view with no
// loop, changes nothing.
func TestResetLoop(t *testing.T) {
	t.Parallel()
	p := argus.LoopParams{RequiredPasses: 2, MaxAttempts: 3, MaxIterations: 3}
	render := digest("9")
	v := advanced(t)
	if d, _ := v.Apply("team-a", spec(events.ModeHeadless), failing("typography"), false, &render, p, t0); !d.BudgetExhausted {
		t.Fatalf("setup: %+v", d)
	}
	if v.ResetLoop(1, Reset{Event: "e", At: t0}) {
		t.Fatal("a reset of loop 1 ended loop 0")
	}
	if !v.ResetLoop(0, Reset{Event: "e1", At: t0, By: "ops", Reason: "rubric fixed"}) {
		t.Fatal("the reset of the current loop was not applied")
	}
	if v.Generation != 1 || v.Loop.Iteration != 0 || v.Reset == nil || v.Reset.Loop != 0 || v.Reset.By != "ops" || !reflect.DeepEqual(v.Began, []string{ResetBegan}) {
		t.Fatalf("after the reset: %+v", v)
	}
	if v.ResetLoop(0, Reset{Event: "e2", At: t0}) {
		t.Fatal("a second reset of loop 0 ended loop 1")
	}
	d, began := v.Apply("team-a", spec(events.ModeHeadless), failing("typography"), false, &render, p, t0)
	if d.Iteration != 1 || d.BudgetExhausted || !reflect.DeepEqual(began, []string{ResetBegan}) || v.Loop.Attempts["typography"] != 1 {
		t.Fatalf("first step after the reset: %+v %v %+v", d, began, v.Loop)
	}
	var empty Record
	if empty.ResetLoop(0, Reset{}) {
		t.Fatal("a view with no loop was reset")
	}
}
