package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	rubriccommands "github.com/tribunal-dev/tribunal/pkg/kind/rubric/commands"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
)

var viewSpecKey = &rubricwire.Spec{Feature: "rubric-feature", Target: "list", State: "populated", Appearance: "light"}

func (e *Env) view(t *testing.T) views.Record {
	t.Helper()
	kv, err := e.JS().KeyValue(t.Context(), bus.BucketViews)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := views.Load(t.Context(), kv, views.Key(e2eTenant, viewSpecKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decisionOf(t *testing.T, e *Env, batchID string) *rubricwire.Decision {
	t.Helper()
	s, err := rubric.StateOf(e.jobs(batchID)[0])
	if err != nil || s == nil || s.Decision == nil {
		t.Fatalf("rubric state %+v, %v", s, err)
	}
	return s.Decision
}

// TestRubricFrozenDimensionEndsBlocked runs the seed's loop in real Chromium with a
// dimension that never passes. loop_state.py freezes it after "max_attempts_per_dimension":
// 3 and leaves it out of fix_dimensions, but "every verdict that is not all_pass" resets
// the streak ("state["consecutive_passes"] = 0"), so the view can never reach two
// consecutive passes: it ends BLOCKED at its iteration budget ("BLOCKED — ... a view hit
// the iteration budget without converging"), never signed off. Once the dimension is
// frozen the builder has nothing left to fix, so the run goes on by itself: the view is
// rendered and judged again, by a fresh judgment each iteration ("dispatched fresh every
// iteration"), although the render does not change.
func TestRubricFrozenDimensionEndsBlocked(t *testing.T) {
	browsertest.Need(t)
	env := NewEnv(t)
	rec := recordCalls(scriptedRubric(t, map[string]any{viewJob: failingVerdict("typography")}))
	env.Start(rec, "all", bus.Services...)
	dir := rubricFeature(t, env, "")
	b := func() *batchT { return rubricBatch(t, dir, ", max_iterations: 5") }

	for run := 1; run <= 2; run++ {
		res := env.Wait(env.Submit(b(), e2eTenant), 60*time.Second)
		if row := res.Rows[0]; row.Status != "needs_fixes" || !strings.Contains(row.Detail, "fix [typography]") {
			t.Fatalf("run %d: %+v", run, row)
		}
	}
	requests := env.subjectCount("tribunal.team-a.render.requested")
	res := env.Wait(env.Submit(b(), e2eTenant), 90*time.Second)
	row := res.Rows[0]
	if row.Status != "budget_exhausted" || !strings.Contains(row.Detail, "loop iteration 5") || !strings.Contains(row.Detail, "frozen [typography]") {
		t.Fatalf("run 3: %+v", row)
	}
	if res.Summary.ExitCode == 0 {
		t.Fatal("a blocked view exits 0")
	}
	var m struct {
		Features []struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
		} `json:"features"`
	}
	if err := json.Unmarshal(res.Manifests["rubric"], &m); err != nil {
		t.Fatal(err)
	}
	if f := m.Features[0]; f.Status != "BLOCKED" || !strings.Contains(strings.Join(f.Reasons, ";"), "frozen: typography") {
		t.Fatalf("feature %+v", f)
	}
	// Run 3 froze typography at iteration 3 and rendered twice more without the builder.
	if got := env.subjectCount("tribunal.team-a.render.requested") - requests; got != 3 {
		t.Fatalf("run 3 asked for %d renders, want 3 (one, then a recheck for iterations 4 and 5)", got)
	}
	// Five iterations, five judgments: identical renders at iterations 4 and 5 are not
	// answered from the judge-call cache.
	if n := len(rec.Snapshot()); n != 5 {
		t.Fatalf("%d judge calls, want 5", n)
	}
	if n := env.subjectCount("tribunal.team-a.signoff.recorded"); n != 0 {
		t.Fatalf("%d sign-offs recorded", n)
	}
	if v := env.view(t); v.SignOff != nil || v.Baseline != nil || v.Loop.Iteration != 5 || !reflect.DeepEqual(v.Loop.Frozen, []string{"typography"}) {
		t.Fatalf("view %+v", v)
	}
	// Each iteration of the run has its gate-result.json in the run's output.
	for it := 3; it <= 5; it++ {
		p := fmt.Sprintf("rubric-feature/list-populated-light/iteration-%d/gate-result.json", it)
		var g struct {
			Target   string `json:"target"`
			AllGreen bool   `json:"all_green"`
			Gates    struct {
				A11y struct {
					Expected int `json:"expected"`
				} `json:"a11y_ids"`
			} `json:"gates"`
		}
		if err := json.Unmarshal(res.Blobs[p], &g); err != nil || g.Target != "list" || !g.AllGreen || g.Gates.A11y.Expected != 4 {
			t.Fatalf("%s: %s (%v)", p, res.Blobs[p], err)
		}
	}
}

// TestRubricResetAndNewLoops: an exhausted budget has two ways out. An operator resets the
// view's loop (view.reset, from `tribunal view-reset` or the console), and the next run
// starts loop 1 with a fresh budget; a changed spec, rubric or reference starts the next
// loop by itself, because the seed's loop converges on one fixed target. Both are
// re-derived by the audit from the stream.
func TestRubricResetAndNewLoops(t *testing.T) {
	browsertest.Need(t)
	env := NewEnv(t)
	env.Start(scriptedRubric(t, map[string]any{viewJob: []any{failingVerdict("typography"), failingVerdict("none")}}), "all", bus.Services...)
	dir := rubricFeature(t, env, "")

	first := env.Wait(env.Submit(rubricBatch(t, dir, ", max_iterations: 1"), e2eTenant), 60*time.Second)
	if first.Rows[0].Status != "budget_exhausted" {
		t.Fatalf("run 1: %+v", first.Rows[0])
	}
	r := env.clientRunning()
	if _, err := rubriccommands.ResetView(t.Context(), r.Buckets, r.Pub, e2eTenant, first.BatchID, viewJob, "ops", "typography was a rubric bug"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "the view's loop to be reset", func() (bool, string) {
		v := env.view(t)
		return v.Generation == 1, fmt.Sprint(v.Generation)
	})
	if v := env.view(t); v.Reset == nil || v.Reset.By != "ops" || v.Reset.Reason != "typography was a rubric bug" || v.Loop.Iteration != 0 {
		t.Fatalf("view after the reset %+v", v)
	}

	second := env.Wait(env.Submit(rubricBatch(t, dir, ", max_iterations: 3"), e2eTenant), 60*time.Second)
	if row := second.Rows[0]; row.Status != "signed_off" || !strings.Contains(row.Detail, "loop iteration 2 of loop 1") {
		t.Fatalf("run 2: %+v", row)
	}
	if d := decisionOf(t, env, second.BatchID); d.Loop != 1 {
		t.Fatalf("run 2 decision %+v", d)
	}
	// The reset is replayed by the audit: run 2's decisions are re-derived from the
	// stream only with it (without it, run 2 would continue loop 0, out of budget).
	if rep := auditBatch(t, env, second.BatchID); !rep.OK() || rep.History == 0 {
		t.Fatalf("audit of run 2: %d history events, mismatches:%s", rep.History, auditDump(t, rep))
	}

	// A changed spec.md starts loop 2 by itself.
	specMD := filepath.Join(dir, "spec.md")
	data, _ := os.ReadFile(specMD)
	if err := os.WriteFile(specMD, append(data, []byte("\nThe empty state says what to do next.\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	third := env.Wait(env.Submit(rubricBatch(t, dir, ", max_iterations: 3"), e2eTenant), 60*time.Second)
	if row := third.Rows[0]; row.Status != "signed_off" || !strings.Contains(row.Detail, "loop iteration 2 of loop 2") {
		t.Fatalf("run 3: %+v", row)
	}
	if v := env.view(t); v.Generation != 2 || !reflect.DeepEqual(v.Began, []string{"spec.md"}) || v.SignOff == nil || v.SignOff.Iterations != 2 {
		t.Fatalf("view after the changed spec %+v", v)
	}
	if rep := auditBatch(t, env, third.BatchID); !rep.OK() || rep.History == 0 {
		t.Fatalf("audit of run 3: %d history events, mismatches:%s", rep.History, auditDump(t, rep))
	}
}
