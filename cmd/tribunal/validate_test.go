package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate: `validate` prints the plan of a batch without running anything: the
// quickstart's two blocked ACs and an entry typo are its problems (exit 2), a clean batch
// exits 0, and --json gives the same plan as data.
func TestValidate(t *testing.T) {
	dir := quickstartCopy(t, criterionTypo)
	stdout, stderr, code := run(t, dir, "validate", ".")
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"3 problems:\n",
		"  AC-2: line 14: unknown key criterian (did you mean criterion?)\n",
		"  AC-9: ours artifact \"ours/onboarding.mp4\": unsupported artifact: video (.mp4)\n",
		"  AC-10: ours artifact \"ours/changelog.html\": missing artifact: ours/changelog.html\n",
		"ours ours/badge.png", "image (image/png)", "html (text/html)",
		"8 ACs, 8 jobs; it would cost 8 judge calls and 8 runner calls",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	// Nothing ran: no results folder, nothing left behind in the batch folder.
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("validate wrote results: %v", err)
	}

	stdout, _, code = run(t, dir, "validate", ".", "--json")
	var plan struct {
		ACs []struct {
			ID         string `json:"id"`
			Kind       string `json:"kind"`
			JudgeCalls int    `json:"judge_calls"`
			Artifacts  []struct {
				Role, Name, Class, Blocked string
			} `json:"artifacts"`
			Blocked string `json:"blocked"`
		} `json:"acs"`
		JudgeCalls, RunnerCalls int
		Problems                []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil || code != 2 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, stdout)
	}
	if len(plan.ACs) != 8 || len(plan.Problems) != 3 || plan.ACs[2].ID != "AC-3" || plan.ACs[2].Artifacts[0].Class != "image" {
		t.Errorf("--json plan %+v", plan)
	}

	// Without its blocked ACs the batch is clean.
	clean := quickstartCopy(t, func(s string) string {
		i, j := strings.Index(s, "  # Video cannot"), strings.Index(s, "  # critic:")
		return s[:i] + s[j:]
	})
	stdout, stderr, code = run(t, clean, "validate", ".")
	if code != 0 || !strings.Contains(stdout, "no problems: every AC would be judged") {
		t.Fatalf("clean batch: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestValidateBadBatch: a file-level error is a usage error, as for run.
func TestValidateBadBatch(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte("version: 1\ntreshold: 0.5\nacs:\n  - id: AC-1\n"), 0o644)
	_, stderr, code := run(t, dir, "validate", ".")
	if code != 2 || !strings.Contains(stderr, "batch.yaml:2: treshold: unknown key (did you mean threshold?)") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}
