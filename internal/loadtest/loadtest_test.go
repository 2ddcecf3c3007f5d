// Package loadtest measures how judge throughput scales with judge processes. It is a
// Go benchmark, not a unit test, so `go test ./...` never runs it; it prints a table for
// docs/benchmarks.md.
//
//	go test ./internal/loadtest -run '^$' -bench JudgeScaling -benchtime 1x -v -timeout 30m
package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

func start(t testing.TB, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func waitHTTP(t testing.TB, url string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
	}
	t.Fatalf("%s not ready", url)
}

// BenchmarkJudgeScaling runs K judge processes (K = 1, 2, 4) against one NATS server and one
// OpenAI-compatible server answering after 500 ms, each judge allowed C calls in flight,
// and reports throughput against the ideal K x C / latency. One pass is one measurement
// of about 60 s per K (TRIBUNAL_LOADTEST_SECONDS): run it with -benchtime 1x.
func BenchmarkJudgeScaling(t *testing.B) {
	const latency = 500 * time.Millisecond
	conc := 8
	if v := os.Getenv("TRIBUNAL_LOADTEST_CONCURRENCY"); v != "" {
		conc, _ = strconv.Atoi(v)
	}
	// Seconds of work per K at the ideal rate. The fixed costs of a batch (submission,
	// the first renders, the last completion) count against its throughput, so a short
	// run understates the steady state.
	seconds := 60
	if v := os.Getenv("TRIBUNAL_LOADTEST_SECONDS"); v != "" {
		seconds, _ = strconv.Atoi(v)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tribunal")
	fake := filepath.Join(dir, "fake-llm")
	for out, pkg := range map[string]string{bin: "../../cmd/tribunal", fake: "../../cmd/fake-llm"} {
		if msg, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, msg)
		}
	}
	llm := freeport.Addr(t)
	start(t, fake, "--listen", llm, "--latency", latency.String())
	waitHTTP(t, "http://"+llm+"/v1/models")
	t.Logf("%-3s %-6s %-10s %-10s %-10s", "K", "ACs", "ACs/s", "ideal", "efficiency")
	for _, k := range []int{1, 2, 4} {
		natsAddr := freeport.Addr(t)
		natsURL := "nats://" + natsAddr
		blobURL := "file://" + filepath.Join(t.TempDir(), "blobs")
		start(t, bin, "serve", "nats", "--listen", natsAddr, "--store", t.TempDir())
		var ready []string
		svc := func(name string, extra ...string) {
			h := freeport.Addr(t)
			start(t, bin, append([]string{"serve", name, "--nats", natsURL, "--blob", blobURL, "--health", h, "--log-level", "error"}, extra...)...)
			ready = append(ready, "http://"+h+"/readyz")
		}
		svc("renderer")
		svc("gater")
		svc("aggregator")
		for i := 0; i < k; i++ {
			svc("judge", "--judge", "openai", "--judge-model", "fake", "--openai-base-url", "http://"+llm+"/v1",
				"--judge-concurrency", strconv.Itoa(conc), "--concurrency", strconv.Itoa(conc), "--instance", fmt.Sprintf("judge-%d", i))
		}
		for _, r := range ready {
			waitHTTP(t, r)
		}
		ideal := float64(k*conc) / latency.Seconds()
		n := int(ideal * float64(seconds))
		batch := t.TempDir()
		var sb strings.Builder
		sb.WriteString("version: 1\nname: load\nacs:\n")
		for i := 0; i < n; i++ {
			os.WriteFile(filepath.Join(batch, fmt.Sprintf("o%d.md", i)), []byte(fmt.Sprintf("ours %d %d\n", k, i)), 0o644)
			os.WriteFile(filepath.Join(batch, fmt.Sprintf("r%d.md", i)), []byte(fmt.Sprintf("reference %d %d\n", k, i)), 0o644)
			fmt.Fprintf(&sb, "  - {id: AC-%d, criterion: c, ours: o%d.md, reference: r%d.md}\n", i, i, i)
		}
		os.WriteFile(filepath.Join(batch, "batch.yaml"), []byte(sb.String()), 0o644)
		begin := time.Now()
		out, err := exec.Command(bin, "submit", batch, "--nats", natsURL, "--blob", blobURL).Output()
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		res, err := exec.CommandContext(ctx, bin, "watch", "--batch", strings.TrimSpace(string(out)), "--nats", natsURL, "--blob", blobURL, "--json", "--quiet").Output()
		cancel()
		elapsed := time.Since(begin)
		var r struct{ Summary struct{ Total, Compared int } }
		if jerr := json.Unmarshal(res, &r); jerr != nil || r.Summary.Compared != n {
			t.Fatalf("K=%d: %v %v %s", k, err, jerr, res)
		}
		rate := float64(n) / elapsed.Seconds()
		t.Logf("%-3d %-6d %-10.1f %-10.1f %.0f%%", k, n, rate, ideal, 100*rate/ideal)
		t.ReportMetric(100*rate/ideal, fmt.Sprintf("efficiency%%_K%d", k))
	}
}
