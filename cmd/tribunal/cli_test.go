package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
)

// binary is the tribunal command built once for these tests: they run it as real
// processes, the way users and operators do.
var binary string

func TestMain(m *testing.M) {
	tribunalbin.Main(m, ".", &binary)
}

// run runs the binary in dir. `tribunal run` keeps its state in the folder it runs in
// unless told otherwise; these tests each want a fresh state, so run passes
// TRIBUNAL_EPHEMERAL (the state tests use runState).
func run(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runEnv(t, dir, []string{"TRIBUNAL_EPHEMERAL=true"}, args...)
}

// runEnv runs the binary in dir with env added to this process's environment.
func runEnv(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestQuickstart is the README's main command: the quickstart batch, offline, no API key.
func TestQuickstart(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, code := run(t, repoRoot(t), "run", "examples/quickstart", "--out", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the quickstart has findings on purpose)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"AC-1", "AC-9", "blocked", "unsupported artifact: video", "verdicts by judge scripted/fixed-A", "no model was asked", "results written to"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	results, _ := filepath.Glob(filepath.Join(out, "quickstart-*", "results.json"))
	manifests, _ := filepath.Glob(filepath.Join(out, "quickstart-*", "manifest.json"))
	if len(results) != 1 || len(manifests) != 1 {
		t.Fatalf("results %v manifests %v", results, manifests)
	}
	var res struct {
		Summary struct{ Total, Compared, Blocked int }
		Judges  []string
	}
	data, _ := os.ReadFile(results[0])
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Summary.Total != 8 || res.Summary.Compared != 6 || res.Summary.Blocked != 2 || len(res.Judges) != 1 {
		t.Fatalf("results.json: %+v", res)
	}
	// One batch, three result shapes: the seed's ab manifest and one per other kind.
	for _, kind := range []string{"manifest-critic.json", "manifest-equivalence.json"} {
		if m, _ := filepath.Glob(filepath.Join(out, "quickstart-*", kind)); len(m) != 1 {
			t.Errorf("%s not written", kind)
		}
	}
	// --json prints the same results as JSON on stdout.
	stdout, _, _ = run(t, repoRoot(t), "run", "examples/quickstart", "--out", t.TempDir(), "--json")
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Summary.Total != 8 {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
}

func TestShuffleCommand(t *testing.T) {
	stdout, _, code := run(t, "", "shuffle", "AC-7", "0")
	if code != 0 || strings.TrimSpace(stdout) != "A=ours,B=reference" {
		t.Fatalf("shuffle AC-7 0 = %q (exit %d)", stdout, code)
	}
	if _, _, code := run(t, "", "shuffle", "AC-7", "minus-one"); code != 2 {
		t.Fatalf("bad iteration exit %d, want 2", code)
	}
}

func TestBadBatchIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte("version: 1\nacs:\n  - id: AC-1\n    ours: a\n    reference: b\nbogus: true\n"), 0o644)
	_, stderr, code := run(t, dir, "run", ".")
	if code != 2 || !strings.Contains(stderr, "batch.yaml:6") || !strings.Contains(stderr, "bogus") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

// TestBadWebAllowHostIsAUsageError: a malformed host list stops the renderer at
// startup, naming the flag and the entry, rather than blocking every web job later.
func TestBadWebAllowHostIsAUsageError(t *testing.T) {
	_, stderr, code := run(t, t.TempDir(), "serve", "renderer", "--web-allow-host", "app.internal,http://evil")
	if code != 2 || !strings.Contains(stderr, "--web-allow-host") || !strings.Contains(stderr, "http://evil") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

func start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	return startWithEnv(t, nil, args...)
}

// startWithEnv is start with variables added to the environment.
func startWithEnv(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	return startInWithEnv(t, "", env, args...)
}

// startIn starts the binary in dir, stopped with SIGTERM at the test's cleanup.
func startIn(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	return startInWithEnv(t, dir, nil, args...)
}

func startInWithEnv(t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%v did not stop on SIGTERM; stderr:\n%s", args, errb.String())
		}
	})
	return cmd
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never became ready", url)
}

// serveStack runs `tribunal serve nats` and `tribunal serve all` (with extra flags) as
// processes, as an operator would, waits until the services are ready, and returns the
// --nats and --blob values that reach them and the services' health address.
func serveStack(t *testing.T, extra ...string) (natsURL, blobURL, health string) {
	t.Helper()
	natsAddr := freeport.Addr(t)
	health = freeport.Addr(t)
	natsURL = "nats://" + natsAddr
	blobURL = "file://" + filepath.Join(t.TempDir(), "blobs")
	start(t, "serve", "nats", "--listen", natsAddr, "--store", t.TempDir())
	start(t, append([]string{"serve", "all", "--nats", natsURL, "--blob", blobURL, "--health", health}, extra...)...)
	waitHTTP(t, "http://"+health+"/readyz")
	return natsURL, blobURL, health
}

// TestDistributed runs NATS and the services as separate processes, submits the
// quickstart with `submit`, follows it with `watch` and reads it again with `results`.
func TestDistributed(t *testing.T) {
	natsURL, blobURL, health := serveStack(t)
	waitHTTP(t, "http://"+health+"/healthz")

	stdout, stderr, code := run(t, repoRoot(t), "submit", "examples/quickstart", "--nats", natsURL, "--blob", blobURL)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	batchID := strings.TrimSpace(stdout)
	stdout, stderr, code = run(t, "", "watch", "--batch", batchID, "--nats", natsURL, "--blob", blobURL)
	if code != 1 || !strings.Contains(stdout, "8 ACs, 6 compared, 2 blocked") {
		t.Fatalf("watch exit %d\n%s\n%s", code, stdout, stderr)
	}
	out := t.TempDir()
	stdout, _, code = run(t, "", "results", "--batch", batchID, "--nats", natsURL, "--blob", blobURL, "--json", "--out", out)
	var res struct {
		BatchID string `json:"batch_id"`
	}
	if code != 1 || json.Unmarshal([]byte(stdout), &res) != nil || res.BatchID != batchID {
		t.Fatalf("results exit %d: %s", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(out, batchID, "manifest.json")); err != nil {
		t.Fatal(err)
	}
}
