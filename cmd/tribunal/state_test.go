package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// projectDir is a fresh project folder holding a copy of the examples, so `tribunal run`
// keeps its default state (.tribunal) there, as in a user's project.
func projectDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(repoRoot(t), "examples"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runState runs the binary in a project folder with its default state.
func runState(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runEnv(t, dir, []string{"TRIBUNAL_EPHEMERAL="}, args...)
}

// batchIDs are the batch ids a results table names.
func batchIDs(out string) []string {
	return regexp.MustCompile(`batch (\S+) \(tenant`).FindAllString(out, -1)
}

// TestRunKeepsStateByDefault: the first run creates .tribunal with a .gitignore, the
// second reuses it (its verdicts come from the judge-call cache), --ephemeral leaves it
// alone and cannot be combined with --data-dir.
func TestRunKeepsStateByDefault(t *testing.T) {
	dir := projectDir(t)
	_, stderr, code := runState(t, dir, "run", "examples/quickstart")
	if code != 1 {
		t.Fatalf("first run exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "state: created .tribunal") {
		t.Errorf("the first run does not say where its state lives:\n%s", stderr)
	}
	if data, err := os.ReadFile(filepath.Join(dir, ".tribunal", ".gitignore")); err != nil || !strings.Contains(string(data), "*") {
		t.Fatalf(".tribunal/.gitignore: %q %v", data, err)
	}
	for _, sub := range []string{"nats", "blobs"} {
		if _, err := os.Stat(filepath.Join(dir, ".tribunal", sub)); err != nil {
			t.Fatalf(".tribunal/%s: %v", sub, err)
		}
	}
	// --rerun: this run is about the cache the first filled, not about the first's
	// results standing (TestUnchangedRerunStands).
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--rerun")
	if code != 1 || strings.Contains(stderr, "state: created") {
		t.Fatalf("second run exit %d\n%s", code, stderr)
	}
	if !regexp.MustCompile(`AC-1\s+ab\s+compared.*\(cached\)`).MatchString(stdout) {
		t.Fatalf("the second run did not answer from the cache the first filled:\n%s", stdout)
	}
	before := dirSize(t, filepath.Join(dir, ".tribunal"))
	if _, stderr, code := runState(t, dir, "run", "examples/quickstart", "--ephemeral"); code != 1 {
		t.Fatalf("--ephemeral exit %d\n%s", code, stderr)
	}
	if after := dirSize(t, filepath.Join(dir, ".tribunal")); after != before {
		t.Fatalf("--ephemeral changed .tribunal: %d bytes before, %d after", before, after)
	}
	_, stderr, code = runState(t, dir, "run", "examples/quickstart", "--ephemeral", "--data-dir", "elsewhere")
	if code != 2 || !strings.Contains(stderr, "--ephemeral and --data-dir") {
		t.Fatalf("--ephemeral --data-dir: exit %d %s", code, stderr)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConcurrentRunsOnOneFolder starts two `tribunal run` processes on one state folder.
// The second waits, saying for whom, until the first is done, then runs on the same store:
// both batches complete, the second from the cache the first filled, and a later process
// reads both from the folder.
func TestConcurrentRunsOnOneFolder(t *testing.T) {
	dir := projectDir(t)
	start := func(name string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, chan time.Time) {
		// --rerun: the second run is to judge on the store the first leaves, not to find
		// the first's results standing.
		cmd := exec.Command(binary, "run", "examples/quickstart", "--scripted-latency", "1500ms", "--rerun", "--out", filepath.Join(dir, "out-"+name))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TRIBUNAL_EPHEMERAL=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan time.Time, 1)
		go func() { _ = cmd.Wait(); done <- time.Now() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, &out, &errb, done
	}
	first, out1, err1, done1 := start("first")
	// The second starts once the first holds the folder.
	waitFor(t, 30*time.Second, "the first run to take the folder", func() bool {
		data, err := os.ReadFile(filepath.Join(dir, ".tribunal", "holder.json"))
		return err == nil && bytes.Contains(data, []byte(`"command":"run"`))
	})
	second, out2, err2, done2 := start("second")
	waitFor(t, 30*time.Second, "the second run to say it waits", func() bool {
		return strings.Contains(err2.String(), "is using .tribunal; waiting for it to finish")
	})
	var end1, end2 time.Time
	select {
	case end1 = <-done1:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the first run never finished\n%s", err1)
	}
	select {
	case end2 = <-done2:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the second run never finished\n%s", err2)
	}
	if !strings.Contains(err2.String(), "pid "+itoa(first.Process.Pid)) {
		t.Errorf("the second run does not name the first (pid %d):\n%s", first.Process.Pid, err2)
	}
	if c1, c2 := first.ProcessState.ExitCode(), second.ProcessState.ExitCode(); c1 != 1 || c2 != 1 {
		t.Fatalf("exit codes %d and %d, want 1 and 1\nfirst:\n%s%s\nsecond:\n%s%s", c1, c2, out1, err1, out2, err2)
	}
	if !end2.After(end1) {
		t.Fatal("the second run finished before the first")
	}
	ids := append(batchIDs(out1.String()), batchIDs(out2.String())...)
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("batches %v", ids)
	}
	if !strings.Contains(out2.String(), "(cached)") {
		t.Errorf("the second run did not use the cache the first filled:\n%s", out2)
	}
	// Both batches are in the one store: a third process reads them back.
	stdout, stderr, code := runState(t, dir, "prune", "--dry-run")
	if code != 0 || !strings.Contains(stdout, "2 batches") {
		t.Fatalf("prune --dry-run over both batches: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func itoa(n int) string {
	data, _ := json.Marshal(n)
	return string(data)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answerByKind answers every kind's request with a valid answer of its schema, so every
// call's answer is kept in the cache (invalid answers are asked again next time).
func answerByKind(req openai.ChatCompletionRequest, _ int) fakellm.Reply {
	name := ""
	if req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil {
		name = req.ResponseFormat.JSONSchema.Name
	}
	switch name {
	case "critic_scores":
		return fakellm.Reply{Content: `{"correctness":8,"slop":2,"scope":8,"verdict":"pass","quality":8,"rationale":"Two plain sentences."}`}
	case "runner_transcript":
		return fakellm.Reply{Content: `{"transcript":"Asked for the component, then fixed it.","self_report":{"steps_followed":["ask"],"steps_skipped":[],"ambiguities":[],"improvisation":[],"deviation_urges":[],"final_output":"fixed"}}`}
	case "equivalence_verdict":
		return fakellm.Reply{Content: `{"verdict":"equivalent","behaviour_delta":"","efficiency_signal":{"original_directness":3,"candidate_directness":4,"interpretation_notes":"same steps"}}`}
	}
	return fakellm.Reply{Content: `{"raw_winner":"B","confidence":0.8,"biggest_gap":"Slot A leaves out what to do next.","reasoning":"B is complete."}`}
}

// TestRerunMakesNoProviderCalls runs the quickstart twice on one state folder with the
// openai provider against a local OpenAI-compatible server: the first run makes every
// call `tribunal validate` plans (judge and equivalence runner calls), the second none,
// though its batch id is new: the judge-call cache (and the transcripts the runner
// captured) are keyed by content and kept in the folder.
func TestRerunMakesNoProviderCalls(t *testing.T) {
	llm := fakellm.New(fakellm.Options{Respond: answerByKind})
	defer llm.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	args := []string{"run", "examples/quickstart", "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", llm.BaseURL()}
	stdout, _, code := runState(t, dir, "validate", "examples/quickstart", "--json")
	var plan struct {
		JudgeCalls  int `json:"judge_calls"`
		RunnerCalls int `json:"runner_calls"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil || plan.JudgeCalls == 0 || plan.RunnerCalls == 0 {
		t.Fatalf("validate (exit %d): %+v %v\n%s", code, plan, err, stdout)
	}
	stdout, stderr, code := runState(t, dir, args...)
	first := llm.Calls()
	if code != 1 {
		t.Fatalf("first run exit %d\n%s\n%s", code, stdout, stderr)
	}
	if want := plan.JudgeCalls + plan.RunnerCalls; first != want {
		t.Fatalf("first run: %d calls, want the %d judge and runner calls validate planned\n%s", first, want, stdout)
	}
	// --rerun: a new batch of the unchanged file, judged from the cache (without it the
	// first batch's results would stand, TestUnchangedRerunStands).
	stdout, stderr, code = runState(t, dir, append(args, "--rerun")...)
	if code != 1 {
		t.Fatalf("second run exit %d\n%s\n%s", code, stdout, stderr)
	}
	if again := llm.Calls() - first; again != 0 {
		t.Fatalf("second run of the unchanged batch: %d provider calls, want 0\n%s", again, stdout)
	}
	if ids := batchIDs(stdout); len(ids) != 1 {
		t.Fatalf("no batch id in\n%s", stdout)
	}
	// The judge's words about slots stay as written; the note says which artifact slot A
	// was (AC-1 put the reference in slot A).
	if !strings.Contains(stdout, "Slot A leaves out what to do next. (slot A was the reference, slot B ours)") {
		t.Errorf("the note does not un-blind the judge's slot words:\n%s", stdout)
	}
	for _, ac := range []string{"AC-1", "AC-2", "AC-3", "AC-7"} {
		if !regexp.MustCompile(ac + `\s+ab\s+compared.*openai/judge-model \(cached\)`).MatchString(stdout) {
			t.Errorf("%s is not reported as answered from the cache:\n%s", ac, stdout)
		}
	}
}

// rubricAnswer is a rubric verdict scoring every dimension of the default rubric 1,
// except failing, scored 0.
func rubricAnswer(failing string) string {
	v := e2e.RubricVerdict(nil, true, []string{})
	if failing != "" {
		v = e2e.RubricVerdict(map[string]float64{failing: 0}, false, []string{failing})
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// TestRubricSignsOffAcrossRuns runs the rubric example in real Chromium with successive
// `tribunal run` invocations on the default state folder, no --data-dir: the first run's
// verdict fails a dimension and hands the builder its fix list; the second continues the
// same loop (loop iteration 3, not 1) and signs the view off. A view whose reference is
// still needed leaves its HE-1 candidate as a PNG next to the run's results.
func TestRubricSignsOffAcrossRuns(t *testing.T) {
	browsertest.Need(t)
	var mu sync.Mutex
	rubricCalls := 0
	llm := fakellm.New(fakellm.Options{Respond: func(req openai.ChatCompletionRequest, n int) fakellm.Reply {
		if req.ResponseFormat == nil || req.ResponseFormat.JSONSchema == nil || req.ResponseFormat.JSONSchema.Name != "rubric_verdict" {
			return answerByKind(req, n)
		}
		mu.Lock()
		defer mu.Unlock()
		rubricCalls++
		if rubricCalls == 1 {
			return fakellm.Reply{Content: rubricAnswer("layout_spacing")}
		}
		return fakellm.Reply{Content: rubricAnswer("")}
	}})
	defer llm.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	args := []string{"run", "examples/rubric-feature", "--judge", "openai", "--judge-model", "vision-model", "--openai-base-url", llm.BaseURL()}

	stdout, stderr, code := runState(t, dir, args...)
	if code != 1 || !regexp.MustCompile(`needs_fixes.*fix \[layout_spacing\]`).MatchString(stdout) {
		t.Fatalf("run 1: exit %d, want 1 with the fix list\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runState(t, dir, args...)
	if code != 0 || !regexp.MustCompile(`signed_off.*loop iteration 3`).MatchString(stdout) {
		t.Fatalf("run 2: exit %d, want 0 with the view signed off at loop iteration 3\n%s\n%s", code, stdout, stderr)
	}
	if rubricCalls != 2 {
		t.Fatalf("%d judge calls, want 2: one per run, the confirmation render is not judged", rubricCalls)
	}
	ids := batchIDs(stdout)
	signoffs, _ := filepath.Glob(filepath.Join(dir, "out", strings.TrimSuffix(strings.TrimPrefix(ids[0], "batch "), " (tenant"), "rubric-feature", "signoff.json"))
	if len(signoffs) != 1 {
		t.Fatalf("no signoff.json beside the second run's results (%v)", ids)
	}

	// HE-1: the reference is needed; the run offers its render as the candidate, as a
	// PNG under the batch's output folder.
	spec := filepath.Join(dir, "examples", "rubric-feature", "spec.json")
	data, _ := os.ReadFile(spec)
	os.WriteFile(spec, []byte(strings.Replace(string(data), `"status": "present"`, `"status": "needed"`, 1)), 0o644)
	stdout, stderr, code = runState(t, dir, args...)
	if !strings.Contains(stdout, "needs_context") {
		t.Fatalf("HE-1 run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(batchIDs(stdout)[0], "batch "), " (tenant")
	pngs, _ := filepath.Glob(filepath.Join(dir, "out", id, "rubric-feature", "candidates", "*.png"))
	if len(pngs) != 1 {
		t.Fatalf("HE-1 candidates under out/%s: %v", id, pngs)
	}
	if data, _ := os.ReadFile(pngs[0]); !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG", pngs[0])
	}
}
