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

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// batchID is the one batch id a results table names.
func batchID(t *testing.T, stdout string) string {
	t.Helper()
	ids := batchIDs(stdout)
	if len(ids) != 1 {
		t.Fatalf("want one batch id in\n%s", stdout)
	}
	return strings.TrimSuffix(strings.TrimPrefix(ids[0], "batch "), " (tenant")
}

// readOut reads every file under dir, by its path below dir.
func readOut(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestUnchangedRerunStands: `tribunal run` on a batch whose every input is unchanged
// since a batch that completed in the same state folder judges nothing: it asks the
// provider nothing (not even the probe), says which batch's results stand and who judged
// them, and prints and writes exactly what that batch's run did, with its exit code;
// --json prints the same results.
func TestUnchangedRerunStands(t *testing.T) {
	llm := fakellm.New(fakellm.Options{Respond: answerByKind})
	defer llm.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	args := []string{"run", "examples/quickstart", "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", llm.BaseURL()}
	stdout1, stderr, code := runState(t, dir, args...)
	if code != 1 {
		t.Fatalf("first run exit %d\n%s\n%s", code, stdout1, stderr)
	}
	id := batchID(t, stdout1)
	calls, listings := llm.Calls(), llm.ModelListings()
	if calls == 0 {
		t.Fatal("the first run asked the model nothing")
	}
	written := readOut(t, filepath.Join(dir, "out"))
	if len(written) < 3 {
		t.Fatalf("the first run wrote %v", written)
	}
	if err := os.RemoveAll(filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}

	stdout2, stderr, code := runState(t, dir, args...)
	if code != 1 {
		t.Fatalf("rerun exit %d, want the first run's 1\n%s\n%s", code, stdout2, stderr)
	}
	if llm.Calls() != calls || llm.ModelListings() != listings {
		t.Fatalf("the unchanged rerun made %d model calls and %d probes, want 0", llm.Calls()-calls, llm.ModelListings()-listings)
	}
	if !strings.Contains(stderr, "unchanged since batch "+id+" (tenant default") || !strings.Contains(stderr, "judged by openai/judge-model") ||
		!strings.Contains(stderr, "its results stand") || !strings.Contains(stderr, "--rerun") {
		t.Fatalf("the rerun does not say which batch's results stand and who judged them:\n%s", stderr)
	}
	if stdout2 != stdout1 {
		t.Fatalf("the rerun printed\n%s\nthe first run\n%s", stdout2, stdout1)
	}
	again := readOut(t, filepath.Join(dir, "out"))
	if len(again) != len(written) {
		t.Fatalf("the rerun wrote %d files, the first run %d", len(again), len(written))
	}
	for name, data := range written {
		if !bytes.Equal(again[name], data) {
			t.Errorf("%s differs from the first run's", name)
		}
	}

	stdout3, _, code := runState(t, dir, append(args, "--json", "-q")...)
	var res struct {
		BatchID string `json:"batch_id"`
		Summary struct {
			ExitCode int `json:"exit_code"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout3), &res); err != nil || code != 1 || res.BatchID != id || res.Summary.ExitCode != 1 {
		t.Fatalf("--json rerun: exit %d, %+v %v\n%s", code, res, err, stdout3)
	}
	if llm.Calls() != calls {
		t.Fatalf("the --json rerun asked the model %d times", llm.Calls()-calls)
	}
}

// TestRerunJudgesAgainOnChange: any change to what can reach a decision makes a new
// batch, judged: an artifact's byte, a spec field, a routing setting in the batch file,
// the judge model, a sampling setting, --rerun itself. After each, the unchanged batch
// finds the new batch's results standing.
func TestRerunJudgesAgainOnChange(t *testing.T) {
	llm := fakellm.New(fakellm.Options{Respond: answerByKind})
	defer llm.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	base := []string{"run", "examples/quickstart", "--judge", "openai", "--openai-base-url", llm.BaseURL(), "-q"}
	model := []string{"--judge-model", "judge-model"}
	stdout, stderr, code := runState(t, dir, append(base, model...)...)
	if code != 1 {
		t.Fatalf("first run exit %d\n%s\n%s", code, stdout, stderr)
	}
	last := batchID(t, stdout)
	edit := func(rel, from, to string) {
		t.Helper()
		p := filepath.Join(dir, "examples", "quickstart", rel)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if from == "" {
			data = append(data, to...)
		} else if !bytes.Contains(data, []byte(from)) {
			t.Fatalf("%s lacks %q", rel, from)
		}
		if err := os.WriteFile(p, bytes.Replace(data, []byte(from), []byte(to), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func() []string
		// calls says whether the new batch must ask the model (an unchanged comparison
		// under the same judge comes from the judge-call cache).
		calls bool
	}{
		{"one artifact byte", func() []string { edit("ours/release-notes.md", "", "!"); return nil }, true},
		{"one spec field", func() []string {
			edit("batch.yaml", "names the failing field and how to fix it.", "names the failing field and how to fix it!")
			return nil
		}, true},
		{"a routing setting", func() []string { edit("batch.yaml", "threshold: 0.75", "threshold: 0.8"); return nil }, false},
		{"the judge model", func() []string { model = []string{"--judge-model", "judge-model-2"}; return nil }, true},
		{"a sampling setting", func() []string { return []string{"--judge-temperature", "0.5"} }, true},
		{"--rerun", func() []string { return []string{"--rerun"} }, false},
	} {
		extra := tc.change()
		calls := llm.Calls()
		args := append(append(append([]string(nil), base...), model...), extra...)
		stdout, stderr, code := runEnv(t, dir, []string{"TRIBUNAL_EPHEMERAL="}, args...)
		id := batchID(t, stdout)
		if code != 1 || id == last || strings.Contains(stderr, "unchanged since") {
			t.Fatalf("%s: exit %d, batch %s (before: %s); want a new batch judged\n%s\n%s", tc.name, code, id, last, stdout, stderr)
		}
		if asked := llm.Calls() > calls; asked != tc.calls {
			t.Errorf("%s: the model was asked %d times", tc.name, llm.Calls()-calls)
		}
		last = id
		// The same inputs again: the batch just judged stands.
		args = append(append(append([]string(nil), base...), model...), extra...)
		if extra != nil && extra[0] == "--rerun" {
			args = args[:len(args)-1]
		}
		stdout, _, _ = runState(t, dir, args...)
		if got := batchID(t, stdout); got != last {
			t.Fatalf("after %s, the unchanged batch gave batch %s, want %s's results standing", tc.name, got, last)
		}
	}
}

// TestRerunAfterIncompleteOrPrunedBatch: a batch that did not complete is never
// reused, and neither is one whose records are gone: the rerun judges again, and says
// why when it found the earlier batch.
func TestRerunAfterIncompleteOrPrunedBatch(t *testing.T) {
	dir := projectDir(t)
	// Killed while its judge takes its time: the batch never completes.
	cut := exec.Command(binary, "run", "examples/quickstart", "--scripted-latency", "60s", "-q")
	cut.Dir, cut.Env = dir, append(os.Environ(), "TRIBUNAL_EPHEMERAL=")
	if err := cut.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cut.Process.Kill() })
	waitFor(t, 60*time.Second, "the cut run to store the batch's plan", func() bool {
		n := 0
		_ = filepath.Walk(filepath.Join(dir, ".tribunal", "blobs"), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				n++
			}
			return nil
		})
		return n > 0
	})
	time.Sleep(time.Second)
	_ = cut.Process.Kill()
	_ = cut.Wait()
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--log-level", "info")
	if code != 1 || strings.Contains(stderr, "unchanged since") {
		t.Fatalf("after an incomplete batch: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The judge's messages were in flight at the kill: the run after it hands the ids of
	// the stream's tail to its publisher, so their redelivered handlers store no copy
	// however long after the kill it starts.
	if !regexp.MustCompile(`restored the message ids of the stream's tail"? ids=[1-9]`).MatchString(stderr) {
		t.Fatalf("the run after a kill restored no ids:\n%s", stderr)
	}
	first := batchID(t, stdout)
	stdout, _, _ = runState(t, dir, "run", "examples/quickstart")
	if got := batchID(t, stdout); got != first {
		t.Fatalf("the completed batch %s does not stand (got %s)", first, got)
	}
	// Its records pruned away: judged again, saying why the earlier results do not stand.
	if out, stderr, code := runState(t, dir, "prune", "--older-than", "1ns"); code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, stderr)
	}
	stdout, stderr, code = runState(t, dir, "run", "examples/quickstart")
	if id := batchID(t, stdout); code != 1 || id == first || !strings.Contains(stderr, "unchanged since batch "+first+", but its results do not stand") {
		t.Fatalf("after a prune: exit %d, batch %s\n%s\n%s", code, id, stdout, stderr)
	}
}

// TestBenchRerunStands: bench on a kept folder takes run's path: the unchanged rerun
// names the batch whose results stand and calls no judge; --rerun judges anew, from
// the cache.
func TestBenchRerunStands(t *testing.T) {
	dir := t.TempDir()
	bench := func(extra ...string) benchReport {
		t.Helper()
		out, errOut, code := run(t, dir, append([]string{"bench", "--acs", "20", "--concurrency", "8", "--data-dir", "kept", "--json"}, extra...)...)
		var r benchReport
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
			t.Fatalf("bench exit %d: %v\n%s\n%s", code, err, out, errOut)
		}
		return r
	}
	first := bench()
	if first.JudgeCalls != 20 || first.StandingBatch != "" || first.ExitCode != 1 {
		t.Fatalf("first bench: %d calls, standing %q, exit %d", first.JudgeCalls, first.StandingBatch, first.ExitCode)
	}
	again := bench()
	if again.StandingBatch == "" || again.JudgeCalls != 0 || again.CacheHits != 0 || again.ExitCode != 1 || again.Judge != first.Judge {
		t.Fatalf("unchanged bench: standing %q, %d calls, %d cache hits, exit %d, judge %q", again.StandingBatch, again.JudgeCalls, again.CacheHits, again.ExitCode, again.Judge)
	}
	forced := bench("--rerun")
	if forced.StandingBatch != "" || forced.JudgeCalls != 0 || forced.CacheHits != 20 {
		t.Fatalf("bench --rerun: standing %q, %d calls, %d cache hits; want a new batch from the cache", forced.StandingBatch, forced.JudgeCalls, forced.CacheHits)
	}
	if last := bench(); last.StandingBatch == again.StandingBatch || last.StandingBatch == "" {
		t.Fatalf("after --rerun the standing batch is %q (was %q)", last.StandingBatch, again.StandingBatch)
	}
}
