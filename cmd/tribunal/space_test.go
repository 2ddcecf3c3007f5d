package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// smallDisk mounts a tmpfs of size on a folder of its own for the test and returns it;
// the test is skipped, saying why, where mounting needs a root this process is not.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a full disk needs a small filesystem: mounting a %s tmpfs failed (root, or CAP_SYS_ADMIN, is needed): %v %s", size, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

func resize(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v %s", dir, err, out)
	}
}

// spaceBatch writes a batch of n ab ACs over small text files into a folder of its own.
func spaceBatch(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	var sb strings.Builder
	sb.WriteString("version: 1\nname: full\nacs:\n")
	for _, side := range []string{"ours", "ref"} {
		if err := os.Mkdir(filepath.Join(dir, side), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		for _, side := range []string{"ours", "ref"} {
			body := fmt.Sprintf("# Notes %d\n%s: %s\n", i, side, strings.Repeat("text ", 40))
			if err := os.WriteFile(filepath.Join(dir, side, fmt.Sprintf("%d.md", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: the notes are clear\n    ours: ours/%d.md\n    reference: ref/%d.md\n", i+1, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunStopsWhenTheDiskFills: a 2,000-AC run whose state folder is on a 30 MiB
// filesystem. On de157a3 it logged a thousand "no ack" lines, never said "disk", left
// paid ACs pending in a batch that could never complete, and a second run paid for all
// 2,000 again. Now it exits 2 saying "no space left" and where; once there is space the
// same command continues the batch, and the provider is asked exactly once per AC over
// both runs.
func TestRunStopsWhenTheDiskFills(t *testing.T) {
	disk := smallDisk(t, "30m")
	acs := 2000
	batchDir := spaceBatch(t, acs)
	llm := fakellm.New(fakellm.Options{})
	defer llm.Close()
	state, out := filepath.Join(disk, "state"), t.TempDir()
	args := []string{"run", batchDir, "--data-dir", state, "--out", out, "--judge", "openai", "--judge-model", "judge-model",
		"--openai-base-url", llm.BaseURL(), "--judge-response-format", "json_object"}
	env := []string{"OPENAI_API_KEY=sk-test"}

	start := time.Now()
	stdout, stderr, code := runEnv(t, t.TempDir(), env, args...)
	t.Logf("first run: exit %d after %s, %d provider calls", code, time.Since(start).Round(time.Millisecond), llm.Calls())
	if code != 2 || !strings.Contains(stderr, "no space left on device: "+state) || !strings.Contains(stderr, "run the same command again") {
		t.Fatalf("exit %d, want 2 saying no space left in %s\nstdout:\n%s\nstderr:\n%s", code, state, stdout, stderr)
	}
	if n := strings.Count(stderr, "no ack"); n > 0 {
		t.Errorf("%d publishes timed out: the run met the full disk instead of stopping before it\n%s", n, stderr)
	}
	first := llm.Calls()
	if first == 0 || first >= acs {
		t.Fatalf("%d provider calls in the first run, want some but not all %d", first, acs)
	}

	resize(t, disk, "300m")
	stdout, stderr, code = runEnv(t, t.TempDir(), env, args...)
	if code != 0 && code != 1 {
		t.Fatalf("second run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "continuing batch") {
		t.Errorf("the second run did not continue the stopped batch:\n%s", stderr)
	}
	if calls := llm.Calls(); calls != acs {
		t.Errorf("%d provider calls over both runs (%d, then %d), want exactly one per AC (%d)", calls, first, calls-first, acs)
	}
	res := readResults(t, out)
	if len(res.Results) != acs || res.Summary.Total != acs {
		t.Errorf("results of %d ACs (summary %+v), want %d", len(res.Results), res.Summary, acs)
	}
}

// TestRunStopsWhenAWriteFindsTheDiskFull: with no reserve (--min-free 0) the first
// write that finds the disk full is JetStream's, which disables itself: the run says so,
// naming the store, and exits 2 at once instead of waiting out every publish.
func TestRunStopsWhenAWriteFindsTheDiskFull(t *testing.T) {
	disk := smallDisk(t, "24m")
	batchDir := spaceBatch(t, 2000)
	state := filepath.Join(disk, "state")
	start := time.Now()
	stdout, stderr, code := runEnv(t, t.TempDir(), nil, "run", batchDir, "--data-dir", state, "--out", t.TempDir(), "--min-free", "0")
	t.Logf("exit %d after %s", code, time.Since(start).Round(time.Millisecond))
	if code != 2 || !strings.Contains(stderr, "no space left on device: "+state) || !strings.Contains(stderr, "The disk filled before the reserve") {
		t.Fatalf("exit %d, want 2 saying no space left in %s\nstdout:\n%s\nstderr:\n%s", code, state, stdout, stderr)
	}
}

// TestRunRefusesAFullDisk: a run that starts with less than --min-free stops before any
// work, saying how much there is.
func TestRunRefusesAFullDisk(t *testing.T) {
	disk := smallDisk(t, "8m")
	state := filepath.Join(disk, "state")
	stdout, stderr, code := runEnv(t, repoRoot(t), nil, "run", "examples/quickstart", "--data-dir", state, "--out", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "no space left on device: "+state) || !strings.Contains(stderr, "below the reserve of 16.0 MiB") {
		t.Fatalf("exit %d, want 2 before any work\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

type resultsFile struct {
	Summary struct {
		Total int `json:"total"`
	} `json:"summary"`
	Results []json.RawMessage `json:"results"`
}

func readResults(t *testing.T, out string) resultsFile {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "*", "results.json"))
	if len(files) != 1 {
		t.Fatalf("results.json under %s: %v", out, files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var r resultsFile
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
