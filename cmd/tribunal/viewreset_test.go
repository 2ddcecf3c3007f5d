package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// copyFeature copies the rubric example into a fresh folder and writes its batch.
func copyFeature(t *testing.T, batch string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "feature")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(repoRoot(t), "examples", "rubric-feature"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(batch), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunWritesArgusRuns: a batch that says argus_runs gets the seed's files in its
// feature's .argus-runs/ ("per-view state.json, candidates, iteration verdicts,
// signoff.json"): `tribunal run` writes the sign-off and each iteration's gate-result.json
// there, and a second run replaces the view's sign-off instead of listing it twice.
func TestRunWritesArgusRuns(t *testing.T) {
	browsertest.Need(t)
	dir := copyFeature(t, "version: 1\nname: rubric\nargus_runs: true\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: headless}\n")
	for n := 1; n <= 2; n++ {
		stdout, stderr, code := run(t, dir, "run", ".", "--out", t.TempDir())
		if code != 0 || !strings.Contains(stderr, "argus runs:") {
			t.Fatalf("run %d: exit %d\n%s\n%s", n, code, stdout, stderr)
		}
		var list []argus.SignOff
		data, err := os.ReadFile(filepath.Join(dir, ".argus-runs", "signoff.json"))
		if err != nil || json.Unmarshal(data, &list) != nil || len(list) != 1 || list[0].Target != "list" {
			t.Fatalf("run %d: signoff.json %s (%v)", n, data, err)
		}
	}
	for _, it := range []string{"iteration-1", "iteration-2"} {
		if _, err := os.Stat(filepath.Join(dir, ".argus-runs", "list-populated-light", it, "gate-result.json")); err != nil {
			t.Errorf("%s: %v", it, err)
		}
	}
}

// TestViewResetCmd: `tribunal view-reset` against running services starts a new loop of a
// view that spent its budget; the next run of the view is iteration 1 of that loop.
func TestViewResetCmd(t *testing.T) {
	browsertest.Need(t)
	dir := copyFeature(t, "version: 1\nname: rubric\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: headless, max_iterations: 1}\n")
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	spec, _ := os.ReadFile(filepath.Join(dir, "spec.json"))
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte(strings.Replace(string(spec), `"route": "page.html"`, `"route": "`+srv.URL+`/page.html"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	answers, _ := json.Marshal(map[string]any{"tasks--list--populated--light": e2e.RubricVerdict(map[string]float64{"typography": 0}, false, []string{"typography"})})
	answersFile := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(answersFile, answers, 0o644); err != nil {
		t.Fatal(err)
	}
	// The served renderer reaches only hosts its operator lists: here the team's app.
	natsURL, blobURL, _ := serveStack(t, "--scripted-answers", answersFile, "--allow-private-urls", "--web-allow-host", strings.TrimPrefix(srv.URL, "http://"))
	conn := []string{"--nats", natsURL, "--blob", blobURL}

	runOnce := func() (string, string) {
		t.Helper()
		stdout, stderr, code := run(t, dir, append([]string{"submit", "."}, conn...)...)
		if code != 0 {
			t.Fatalf("submit exit %d: %s", code, stderr)
		}
		id := strings.TrimSpace(stdout)
		stdout, stderr, _ = run(t, "", append([]string{"watch", "--batch", id, "--json"}, conn...)...)
		var res struct {
			Results []struct{ Status, Detail string } `json:"results"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Results) != 1 {
			t.Fatalf("watch: %v\n%s\n%s", err, stdout, stderr)
		}
		return id, res.Results[0].Status + ": " + res.Results[0].Detail
	}
	id, row := runOnce()
	if !strings.HasPrefix(row, "budget_exhausted: ") || !strings.Contains(row, "loop iteration 1") {
		t.Fatalf("run 1: %s", row)
	}
	if _, row = runOnce(); !strings.Contains(row, "loop iteration 2") {
		t.Fatalf("run 2, without a reset, continues the spent loop: %s", row)
	}
	stdout, stderr, code := run(t, "", append([]string{"view-reset", "--batch", id, "--job", "tasks--list--populated--light", "--reason", "rubric fixed"}, conn...)...)
	if code != 0 || !strings.Contains(stdout, "reset of loop 0") {
		t.Fatalf("view-reset exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, row = runOnce(); !strings.HasPrefix(row, "budget_exhausted: ") || !strings.Contains(row, "loop iteration 1") {
		t.Fatalf("run 3, after the reset, starts a new loop: %s", row)
	}
	if _, stderr, code := run(t, "", append([]string{"view-reset", "--batch", id, "--job", "no-such-job"}, conn...)...); code != 2 || !strings.Contains(stderr, "no-such-job") {
		t.Fatalf("an unknown job: exit %d %s", code, stderr)
	}
}

// rubricAnswers writes a scripted-answers file giving the rubric example's one view the
// verdict e2e.RubricVerdict makes of low, allPass and failed.
func rubricAnswers(t *testing.T, low map[string]float64, allPass bool, failed []string) string {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"tasks--list--populated--light": e2e.RubricVerdict(low, allPass, failed)})
	path := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rubricRun runs the feature in dir on its default state folder and returns the batch
// id and the view's row ("status: detail").
func rubricRun(t *testing.T, dir, answers string) (string, string) {
	t.Helper()
	stdout, stderr, code := runState(t, dir, "run", ".", "--scripted-answers", answers, "--out", t.TempDir(), "--json")
	var res struct {
		BatchID string                            `json:"batch_id"`
		Results []struct{ Status, Detail string } `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Results) != 1 {
		t.Fatalf("run: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	return res.BatchID, res.Results[0].Status + ": " + res.Results[0].Detail
}

// TestViewResetOnRunState: after `tribunal run` spent a view's budget, `tribunal
// view-reset` in the project folder, with no server and no flag, resets the loop in the
// state folder the run kept (its aggregator applies it before the command returns); the
// next run starts the view's next loop at iteration 1, and the audit lists the reset as
// an input from a person and re-derives everything.
func TestViewResetOnRunState(t *testing.T) {
	browsertest.Need(t)
	dir := copyFeature(t, "version: 1\nname: rubric\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: headless, max_iterations: 1}\n")
	failing := rubricAnswers(t, map[string]float64{"typography": 0}, false, []string{"typography"})
	first, row := rubricRun(t, dir, failing)
	if !strings.HasPrefix(row, "budget_exhausted: ") || !strings.Contains(row, "loop iteration 1;") {
		t.Fatalf("run 1: %s", row)
	}
	if _, row = rubricRun(t, dir, failing); !strings.Contains(row, "loop iteration 2;") {
		t.Fatalf("run 2, without a reset, continues the spent loop: %s", row)
	}
	job := "tasks--list--populated--light"
	if _, stderr, code := runState(t, dir, "spotcheck", "approve", "--batch", first, "--job", job); code != 2 || !strings.Contains(stderr, "not a sign-off waiting for a spot-check: its status is budget_exhausted") {
		t.Fatalf("a spot-check of a spent view: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := runState(t, dir, "view-reset", "--batch", first, "--job", job, "--reason", "rubric fixed")
	if code != 0 || !strings.Contains(stdout, "reset of loop 0 of "+job+" recorded: the view's next run starts loop 1 at iteration 1") ||
		!strings.Contains(stderr, "state: reading .tribunal") {
		t.Fatalf("view-reset on the run's state: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code := runState(t, dir, "view-reset", "--batch", first, "--job", job); code != 2 || !strings.Contains(stderr, "has no loop to reset yet") {
		t.Fatalf("a second reset before the next run: exit %d\n%s", code, stderr)
	}
	third, row := rubricRun(t, dir, failing)
	if !strings.HasPrefix(row, "budget_exhausted: ") || !strings.Contains(row, "loop iteration 1 of loop 1;") {
		t.Fatalf("run 3, after the reset, starts the next loop: %s", row)
	}
	stdout, stderr, code = runState(t, dir, "audit", "--batch", first)
	if code != 0 || !strings.Contains(stdout, "inputs from people") ||
		!regexp.MustCompile(`job `+job+` view\.reset \S+ \(seq \d+\): reset loop 0 by \S+ at \S+: rubric fixed`).MatchString(stdout) ||
		!strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit of the reset batch: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stdout, stderr, code = runState(t, dir, "audit", "--batch", third); code != 0 || !strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit of the batch whose loop the reset began: exit %d\n%s\n%s", code, stdout, stderr)
	}
	elsewhere := t.TempDir()
	if _, stderr, code := runState(t, elsewhere, "view-reset", "--batch", third, "--job", job, "--data-dir", filepath.Join(dir, ".tribunal")); code != 0 {
		t.Fatalf("view-reset --data-dir: exit %d\n%s", code, stderr)
	}
}
