package stages

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// planTemplate plans seed 004's template (pkg/kind/rubric/argus/testdata/seed-template) laid out as
// argus/specs/example/ under a batch folder, as ac (its ID and Spec set here) asks.
func planTemplate(t *testing.T, ac batch.AC, edit func(string) string) []events.JobSpec {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "argus", "specs", "example")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"spec.json", "tokens.json", "contrast-pairs.json"} {
		data, err := os.ReadFile(filepath.Join("..", "argus", "testdata", "seed-template", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "spec.json" && edit != nil {
			data = []byte(edit(string(data)))
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "spec.md"), []byte("# example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &batch.Batch{Path: filepath.Join(root, "batch.yaml"), Dir: root}
	env := &stage.PlanEnv{Batch: b, Tenant: "team-a", Store: store, ServeFeature: func(string) (string, error) { return "http://127.0.0.1:1/", nil }}
	e := entryOf(ac)
	e.Spec = "argus/specs/example/spec.json"
	ac.ID, ac.Part = "example", e
	plans, err := Kind{}.Plan(context.Background(), env, ac)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.JobSpec
	for _, p := range plans {
		out = append(out, p.Build(nil))
	}
	return out
}

// TestHE1OneCandidatePerScreen pins seed 004's HE-1 on its own template: "the canonical
// view (target.canonical or states[0]+appearances[0]) is the one that needs a reference
// image; other views are deltas". Of the template's four views only populated/dark renders
// (and carries the spec.json change that sets its entry to candidate); the other three
// need context at submission, rendering nothing. A candidate already offered, and a
// report-only look, render nothing at all.
func TestHE1OneCandidatePerScreen(t *testing.T) {
	settled := func(js events.JobSpec) string {
		j := &records.Job{Spec: js, Status: events.StatusPending}
		if !(Kind{}).Settle(j) {
			return ""
		}
		if j.Status != events.StatusNeedsContext {
			t.Fatalf("settled as %s", j.Status)
		}
		return j.BlockReason
	}
	specs := planTemplate(t, batch.AC{Part: &Entry{Mode: events.ModeHeadless}}, nil)
	if len(specs) != 4 {
		t.Fatalf("%d views", len(specs))
	}
	for _, js := range specs {
		rs := rubricwire.SpecOf(js.KindPart)
		canonical := rs.State == "populated" && rs.Appearance == "dark"
		reason := settled(js)
		if canonical != (reason == "") || canonical != (rs.SpecChange != nil) || (Kind{}).Estimate(js).JudgeCalls != map[bool]int{true: 1, false: 0}[canonical] {
			t.Errorf("%s: canonical %v, settled %q, spec change %+v", js.ACID, canonical, reason, rs.SpecChange)
		}
		if canonical {
			if rs.SpecChange.File != "argus/specs/example/spec.json" || rs.SpecChange.Patch != `{"op":"replace","path":"/targets/0/references/0/status","value":"candidate"}` {
				t.Errorf("spec change %+v", rs.SpecChange)
			}
		} else if !strings.Contains(reason, "its canonical view renders the candidate") {
			t.Errorf("%s: %q", js.ACID, reason)
		}
	}
	for _, js := range planTemplate(t, batch.AC{Part: &Entry{Mode: events.ModeReportOnly}}, nil) {
		if r := settled(js); r == "" || rubricwire.SpecOf(js.KindPart).SpecChange != nil || rubricwire.SpecOf(js.KindPart).Canonical && !strings.Contains(r, "report-only renders no candidate") {
			t.Errorf("report-only %s: %q, change %+v", js.ACID, r, rubricwire.SpecOf(js.KindPart).SpecChange)
		}
	}
	candidate := func(s string) string { return strings.Replace(s, `"status": "needed"`, `"status": "candidate"`, 1) }
	for _, js := range planTemplate(t, batch.AC{Part: &Entry{Mode: events.ModeInteractive}}, candidate) {
		r := settled(js)
		if r == "" || rubricwire.SpecOf(js.KindPart).SpecChange != nil || rubricwire.SpecOf(js.KindPart).Canonical && !strings.Contains(r, "the candidate .argus-runs/candidates/list-populated-dark.png awaits a person") {
			t.Errorf("candidate %s: %q", js.ACID, r)
		}
	}
}

// TestPlanSelectsTargetsAndViews: an AC narrowed by a run's --target or --ac <view id>
// plans only those views.
func TestPlanSelectsTargetsAndViews(t *testing.T) {
	ids := func(specs []events.JobSpec) []string {
		var out []string
		for _, js := range specs {
			out = append(out, js.ACID)
		}
		return out
	}
	if got := ids(planTemplate(t, batch.AC{}.WithTargets([]string{"list"}), nil)); len(got) != 4 {
		t.Fatalf("--target list: %v", got)
	}
	if got := ids(planTemplate(t, batch.AC{}.WithViews([]string{"example--list--empty--dark"}), nil)); !reflect.DeepEqual(got, []string{"example--list--empty--dark"}) {
		t.Fatalf("--ac view: %v", got)
	}
	got := planTemplate(t, batch.AC{}.WithTargets([]string{"detail"}), nil)
	if len(got) != 1 || !strings.Contains(rubricwire.SpecOf(got[0].KindPart).Blocked, "leaves no view") {
		t.Fatalf("a target the feature lacks: %+v", got)
	}
}

// TestFilesStateAndVerdicts: a view keeps loop_state.py's state file as
// state-<view>.json and each judged iteration's normalized verdict as
// <view>/iteration-<n>.json; a report-only view keeps nothing in .argus-runs/; an HE-1
// candidate goes to the feature's .argus-runs/ with its spec.json change even when the
// batch does not ask for argus_runs.
func TestFilesStateAndVerdicts(t *testing.T) {
	loop := argus.NewLoopState("example", "list/populated/dark", "human")
	loop.Iteration, loop.ConsecutivePasses = 2, 2
	v := argus.Verdict{Iteration: 1, Feature: "example", Target: "list", AllPass: true, FailedDimensions: []string{}}
	st := &rubric.State{Loop: loop, Verdicts: []rubric.IterationVerdict{{Iteration: 1, Verdict: v}}}
	data, _ := json.Marshal(st)
	files := func(mode, runs string, state []byte, change *rubricwire.SpecChange) map[string]kind.File {
		j := &records.Job{Spec: events.JobSpec{Kind: events.KindRubric, KindPart: &rubricwire.Spec{Feature: "example", Target: "list", State: "populated",
			Appearance: "dark", Mode: mode, Runs: runs, SpecChange: change, Canonical: true}}, Loop: state}
		out := map[string]kind.File{}
		for _, f := range (Kind{}).Files(j) {
			out[f.Path+" > "+f.Beside] = f
		}
		return out
	}
	runs := "argus/specs/example/.argus-runs"
	got := files(events.ModeHeadless, runs, data, nil)
	s, ok := got["example/state-list-populated-dark.json > "+runs+"/state-list-populated-dark.json"]
	if !ok || !reflect.DeepEqual(s.Doc, loop) {
		t.Fatalf("state file: %v", got)
	}
	if f, ok := got["example/list-populated-dark/iteration-1.json > "+runs+"/list-populated-dark/iteration-1.json"]; !ok || !reflect.DeepEqual(f.Doc, v) {
		t.Fatalf("iteration verdict: %v", got)
	}
	for k := range files(events.ModeReportOnly, runs, data, nil) {
		if !strings.HasSuffix(k, " > ") || strings.Contains(k, "state-") {
			t.Errorf("report-only keeps %s", k)
		}
	}
	cand := events.Blob{SHA256: strings.Repeat("c", 64), MediaType: "image/png", Size: 1}
	data, _ = json.Marshal(&rubric.State{Candidate: &cand})
	change := &rubricwire.SpecChange{File: "argus/specs/example/spec.json", Patch: `{"op":"replace","path":"/targets/0/references/0/status","value":"candidate"}`}
	got = files(events.ModeHeadless, "", data, change)
	if _, ok := got["example/candidates/list-populated-dark.png > argus/specs/example/.argus-runs/candidates/list-populated-dark.png"]; !ok {
		t.Fatalf("the candidate where the seed keeps it: %v", got)
	}
	c, ok := got[" > argus/specs/example/spec.json"]
	if sc, isSpec := c.Change.(argus.SpecChange); !ok || !isSpec || sc.Op != "replace" || sc.Path != "/targets/0/references/0/status" {
		t.Fatalf("the spec.json change: %v", got)
	}
}
