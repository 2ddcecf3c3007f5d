package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
