package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart")
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
		cmd := exec.Command(binary, "run", "examples/quickstart", "--scripted-latency", "1500ms", "--out", filepath.Join(dir, "out-"+name))
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
