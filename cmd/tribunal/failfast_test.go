package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

// TestRunStopsOnAProviderThatCannotWork: `run` with a provider that cannot work stops
// before any work with exit 2 and the cause in full: no key where the endpoint needs one,
// a key the server refuses (none, or the wrong one), a server that is not there.
func TestRunStopsOnAProviderThatCannotWork(t *testing.T) {
	llm := fakellm.New(fakellm.Options{APIKey: "sk-right-key-1234"})
	defer llm.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := l.Addr().String()
	l.Close()
	openai := func(base string) []string {
		args := []string{"run", "examples/quickstart", "--out", t.TempDir(), "-q", "--judge", "openai", "--judge-model", "judge-model"}
		if base != "" {
			args = append(args, "--openai-base-url", base)
		}
		return args
	}
	for _, tc := range []struct {
		name, key, base string
		want            []string
	}{
		{"no key for OpenAI", "", "", []string{"no API key, and https://api.openai.com/v1 needs one", "$OPENAI_API_KEY"}},
		{"no key", "", llm.BaseURL(), []string{"GET " + llm.BaseURL() + "/models: the server refused the key: HTTP 401: You didn't provide an API key", "$OPENAI_API_KEY"}},
		{"wrong key", "sk-wrong-key-9999", llm.BaseURL(), []string{"the server refused the key: HTTP 401: Incorrect API key provided: sk-*****9999. You can find your API key at https://platform.openai.com/account/api-keys."}},
		{"unreachable", "k", "http://" + nowhere + "/v1", []string{"server not reachable", nowhere, "connection refused", "--openai-base-url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", tc.key)
			t.Setenv("TRIBUNAL_OPENAI_BASE_URL", "")
			t.Setenv("OPENAI_BASE_URL", "")
			stdout, stderr, code := run(t, repoRoot(t), openai(tc.base)...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, want 2 before any work\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
	if llm.Calls() != 0 {
		t.Errorf("the model was asked %d times by runs that should not have started", llm.Calls())
	}
	// With the right key the probe passes and the batch is judged.
	t.Setenv("OPENAI_API_KEY", "sk-right-key-1234")
	stdout, stderr, code := run(t, repoRoot(t), openai(llm.BaseURL())...)
	if code == 2 || llm.Calls() == 0 || !strings.Contains(stdout, "verdicts by judge openai/") {
		t.Fatalf("right key: exit %d, %d model calls\nstdout:\n%s\nstderr:\n%s", code, llm.Calls(), stdout, stderr)
	}
}

// TestBlockedCauseInFull: a blocked AC's cause longer than the table's note column is
// printed in full below the table.
func TestBlockedCauseInFull(t *testing.T) {
	long := "ours/" + strings.Repeat("a-very-long-artifact-name-", 6) + "end.md"
	dir := quickstartCopy(t, func(s string) string {
		return strings.Replace(s, "ours: ours/changelog.html", "ours: "+long, 1)
	})
	stdout, stderr, code := run(t, dir, "run", ".", "--out", t.TempDir(), "-q")
	want := `AC-10 (blocked): ours artifact "` + long + `": missing artifact: ` + long
	if code != 1 || !strings.Contains(stdout, "causes in full:\n") || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d; want the cause in full: %s\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
}

// readyz polls url until it answers status with a body containing want.
func readyz(t *testing.T, url string, status int, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = resp.Status + " " + string(body)
			if resp.StatusCode == status && strings.Contains(string(body), want) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: never %d with %q; last %s", url, status, want, last)
}

// TestServeNotReadyUntilProviderWorks: `serve judge` and `serve renderer` (which runs
// equivalence documents through the provider) stay not ready, /readyz saying why, while
// the provider cannot work, and become ready once it can: the judge's server comes up
// later and the probe, repeated with backoff, passes; the renderer's key stays refused.
func TestServeNotReadyUntilProviderWorks(t *testing.T) {
	natsAddr, llmAddr, judgeHealth, rendererHealth := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	natsURL := "nats://" + natsAddr
	blobURL := "file://" + filepath.Join(t.TempDir(), "blobs")
	start(t, "serve", "nats", "--listen", natsAddr, "--store", t.TempDir())
	provider := []string{"--nats", natsURL, "--blob", blobURL, "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", "http://" + llmAddr + "/v1"}

	t.Setenv("OPENAI_API_KEY", "sk-right-key-1234")
	start(t, append([]string{"serve", "judge", "--health", judgeHealth}, provider...)...)
	readyz(t, "http://"+judgeHealth+"/readyz", http.StatusServiceUnavailable, "server not reachable")
	waitHTTP(t, "http://"+judgeHealth+"/healthz")

	t.Setenv("OPENAI_API_KEY", "sk-wrong-key-9999")
	start(t, append([]string{"serve", "renderer", "--health", rendererHealth}, provider...)...)

	// The model server comes up.
	ln, err := net.Listen("tcp", llmAddr)
	if err != nil {
		t.Fatal(err)
	}
	llm := fakellm.NewUnstarted(fakellm.Options{APIKey: "sk-right-key-1234"})
	srv := &http.Server{Handler: llm.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})

	readyz(t, "http://"+judgeHealth+"/readyz", http.StatusOK, "ready")
	readyz(t, "http://"+rendererHealth+"/readyz", http.StatusServiceUnavailable, "the server refused the key: HTTP 401: Incorrect API key provided")
	if llm.ModelListings() < 2 {
		t.Errorf("%d probes reached the server, want the judge's and the renderer's", llm.ModelListings())
	}
}
