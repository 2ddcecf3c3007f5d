package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
