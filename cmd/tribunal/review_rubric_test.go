package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/review"
	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// TestReviewRubricDecidesValidation: a batch whose review decides has its rubric AC
// refused with the key named and the reason (a view's outcome is its loop's; its
// person who decides is the HE-2 spot-check), as a rubric AC asking for trials is.
func TestReviewRubricDecidesValidation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rubric.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nname: r\nreview: {count: 1, seed: s, decides: true}\nacs:\n  - id: tasks\n    kind: rubric\n    spec: spec.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, dir, "validate", p)
	if code == 0 || !strings.Contains(stdout+stderr, "review.decides: a rubric view's reviews measure its judge") || !strings.Contains(stdout+stderr, "HE-2") {
		t.Errorf("rubric decides: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestPrintPeopleRubric: the report's agreement with people on rubric lists every
// dimension with its exact share, weighted kappa and mean absolute difference, each with
// its interval, and which way the judge errs; it says nothing of slots, which a rubric
// verdict does not pick.
func TestPrintPeopleRubric(t *testing.T) {
	rep := &client.ReviewReport{Reviewed: 2, Reviews: 2, Agreement: []review.Agreement{{Kind: "rubric", Model: "p/m", N: 2,
		Share: stats.Wilson95(1, 2), Lenient: 1,
		Scores: []review.ScoreAgreement{{Dimension: "typography", N: 2, Exact: stats.Wilson95(1, 2),
			Kappa:       stats.Kappa{N: 2, Defined: true, Interval: stats.Interval{Point: 0.5, Lo: 0.1, Hi: 0.9}},
			MeanAbsDiff: stats.Interval{Point: 0.25, Lo: 0, Hi: 0.5}, Higher: 1}},
		Disagreements: []review.Disagreement{{AC: "F--t--s--a", By: "ann", Judge: "pass", Person: "fail", Lean: "lenient"}}}}}
	var b strings.Builder
	printPeople(&b, rep)
	out := b.String()
	for _, want := range []string{"p/m on rubric: agreement 1/2", "typography: exact 1/2 = 0.500 [", "weighted kappa 0.500 [0.100, 0.900]",
		"mean absolute difference 0.250 [0.000, 0.500], judge higher 1, lower 0", "F--t--s--a: judge pass, ann fail (judge too lenient)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "slot A") {
		t.Errorf("a rubric agreement speaks of slots:\n%s", out)
	}
}

// TestReviewRubricOnRunState: a rubric view `tribunal run` signed off in the state
// folder is reviewed with the CLI. `tribunal review --export` shows the judge's call,
// blind (no job id, no path), with the view's rubric dimensions to answer; an import
// scoring a dimension 0.7 is refused naming the field, before anything is recorded; a
// valid one (keyed by the view's job id, as a team's own tool would) is recorded; the
// report gives the agreement per rubric dimension, and the audit re-derives the batch.
func TestReviewRubricOnRunState(t *testing.T) {
	browsertest.Need(t)
	dir := copyFeature(t, "version: 1\nname: rubric\nreview: {count: 1, seed: s}\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: headless}\n")
	id, row := rubricRun(t, dir, rubricAnswers(t, nil, true, []string{}))
	if !strings.HasPrefix(row, "signed_off: ") {
		t.Fatalf("run: %s", row)
	}
	const job = "tasks--list--populated--light"
	stdout, stderr, code := runState(t, dir, "review", "--batch", id, "--export", "-")
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	// The judge's gate result names the project's folder on this machine when no gates
	// adapter ran (the local mode tells its one user where to add one); the reviewer is
	// shown what the judge was, and a rubric view has no role a folder could tell.
	for _, leak := range []string{job, id} {
		if i := strings.Index(stdout, leak); i >= 0 {
			t.Errorf("the export shows %q: %s", leak, stdout[max(0, i-300):min(len(stdout), i+200)])
		}
	}
	var ex client.ReviewExport
	if err := json.Unmarshal([]byte(stdout), &ex); err != nil || len(ex.Items) != 1 || len(ex.Images) < 2 || !strings.Contains(ex.Items[0].Answer, `"typography": {"score": "0 | 0.5 | 1"`) {
		t.Fatalf("export: %v, %+v", err, ex.Items)
	}
	answer := func(scores map[string]float64) map[string]any {
		return map[string]any{job: e2e.RubricVerdict(scores, true, []string{})}
	}
	if _, stderr, code := runState(t, dir, "review", "--batch", id, "--import", answersFile(t, answer(map[string]float64{"typography": 0.7}))); code != 2 || !strings.Contains(stderr, "dimensions.typography.score") {
		t.Fatalf("a score of 0.7: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runState(t, dir, "review", "--batch", id, "--import", answersFile(t, answer(map[string]float64{"typography": 0.5, "hierarchy": 0}))); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	r := report(t, dir, id)
	if r.Reviewed != 1 || len(r.Agreement) != 1 || r.Agreement[0].Kind != "rubric" || r.Agreement[0].Lenient != 1 || len(r.Agreement[0].Scores) != 7 {
		t.Fatalf("report %+v", r)
	}
	for _, s := range r.Agreement[0].Scores {
		want := map[string]float64{"typography": 0.5, "hierarchy": 1}[s.Dimension]
		if s.MeanAbsDiff.Point != want || (want > 0) != (s.Higher == 1) {
			t.Errorf("%s: %+v, want a mean absolute difference of %v", s.Dimension, s, want)
		}
	}
	stdout, stderr, code = runState(t, dir, "report", "--batch", id)
	if code != 0 || !strings.Contains(stdout, "on rubric: agreement 0/1") || !strings.Contains(stdout, "typography: exact 0/1") {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", id); code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
