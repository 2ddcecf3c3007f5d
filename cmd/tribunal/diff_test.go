package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffOfTwoRuns: the quickstart judged twice, the second time with the scripted
// judge preferring slot B, so AC-7 (ours in slot A) gets worse and AC-1 to AC-3 better.
// tribunal diff lists the regression with its scores, as text, as a Markdown table and as
// JSON, from batch ids in the state and from results.json files elsewhere; the exit code
// follows --fail-on.
func TestDiffOfTwoRuns(t *testing.T) {
	dir := projectDir(t)
	id := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := runState(t, dir, append([]string{"run", "examples/quickstart", "--rerun"}, args...)...)
		if code != 1 {
			t.Fatalf("run %v: exit %d\n%s", args, code, stderr)
		}
		return strings.Fields(batchIDs(stdout)[0])[1]
	}
	base, next := id(), id("--scripted-winner", "B")

	stdout, stderr, code := runState(t, dir, "diff", base, next)
	if code != 1 {
		t.Fatalf("diff: exit %d, want 1 (a regression)\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"1 regressed, 3 improved, 4 unchanged, 0 added, 0 removed", "regressed (1):\n  AC-7", "clean (ours) -> block (reference)",
		"score 1.00 -> 0.00", "improved (3):", "1 regression failing on"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, _ = runState(t, dir, "diff", base, next, "--format", "markdown")
	if !strings.Contains(stdout, "| AC | kind | change | base | new | score | note |\n|---|---|---|---|---|---|---|\n| AC-7 | ab | **regressed** | clean (ours) | block (reference) | 1.00 → 0.00 |") {
		t.Errorf("markdown:\n%s", stdout)
	}
	// Under a policy that fails on fix only, a regression to block lets the pipeline by.
	if _, _, code := runState(t, dir, "diff", base, next, "--fail-on", "fix"); code != 0 {
		t.Errorf("--fail-on fix: exit %d, want 0", code)
	}
	// A batch against itself: nothing regressed.
	if stdout, _, code := runState(t, dir, "diff", base, base); code != 0 || !strings.Contains(stdout, "0 regressed, 0 improved, 8 unchanged") {
		t.Errorf("diff base base: exit %d\n%s", code, stdout)
	}

	// Across machines: the two results.json files, read with no state at all.
	elsewhere := t.TempDir()
	stdout, stderr, code = runState(t, elsewhere, "diff", filepath.Join(dir, "out", base), filepath.Join(dir, "out", next, "results.json"), "--json")
	if code != 1 {
		t.Fatalf("diff of files: exit %d\n%s", code, stderr)
	}
	var d struct {
		Counts  map[string]int `json:"counts"`
		Failing []string       `json:"failing"`
		Entries []struct {
			ACID   string `json:"ac_id"`
			Change string `json:"change"`
			Base   struct {
				Score *float64 `json:"score"`
			} `json:"base"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil || d.Counts["regressed"] != 1 || len(d.Failing) != 1 || d.Failing[0] != "AC-7" {
		t.Fatalf("--json: %v %+v\n%s", err, d, stdout)
	}
	if _, stderr, code := runState(t, elsewhere, "diff", "no-such-batch", filepath.Join(dir, "out", next)); code != 2 || !strings.Contains(stderr, "no tribunal state here") {
		t.Errorf("a batch id without state: exit %d\n%s", code, stderr)
	}
}

// TestResultsFindTheTenant: a batch of another tenant is found by its id alone from the
// local state.
func TestResultsFindTheTenant(t *testing.T) {
	dir := projectDir(t)
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--tenant", "team-a")
	if code != 1 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	id := strings.Fields(batchIDs(stdout)[0])[1]
	stdout, stderr, code = runState(t, dir, "results", "--batch", id)
	if code != 1 || !strings.Contains(stdout, "batch "+id+" (tenant team-a)") {
		t.Fatalf("results --batch %s: exit %d\n%s\n%s", id, code, stdout, stderr)
	}
	if _, stderr, code = runState(t, dir, "results", "--batch", id, "--tenant", "default"); code == 0 || !strings.Contains(stderr, "not found") {
		t.Errorf("results --tenant default: exit %d\n%s", code, stderr)
	}
}

// TestCachedForEveryKind: a rerun answered from the judge-call cache marks every kind's
// row "(cached)" in the table and cached in results.json, critic and equivalence too; a
// batch of one AC says "1 AC".
func TestCachedForEveryKind(t *testing.T) {
	dir := projectDir(t)
	if _, stderr, code := runState(t, dir, "run", "examples/quickstart", "-q"); code != 1 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--rerun", "--json")
	if code != 1 {
		t.Fatalf("rerun: exit %d\n%s", code, stderr)
	}
	var res struct {
		Rows []struct {
			ACID   string `json:"ac_id"`
			Kind   string `json:"kind"`
			Status string `json:"status"`
			Cached bool   `json:"cached"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, r := range res.Rows {
		if r.Status == "compared" {
			kinds[r.Kind] = true
			if !r.Cached {
				t.Errorf("%s (%s) answered from the cache is not marked cached", r.ACID, r.Kind)
			}
		}
	}
	if !kinds["critic"] || !kinds["equivalence"] || !kinds["ab"] {
		t.Fatalf("kinds compared: %v", kinds)
	}
	stdout, _, _ = runState(t, dir, "run", "examples/quickstart", "--rerun", "--ac", "AC-11")
	if !strings.Contains(stdout, "scripted/fixed-A (cached)") || !strings.Contains(stdout, "(tenant default): 1 AC, 1 compared, 0 blocked, 0 schema violations, 0 findings") {
		t.Errorf("one critic AC from the cache:\n%s", stdout)
	}
}
