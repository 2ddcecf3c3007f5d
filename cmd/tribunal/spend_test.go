package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// writePanelBatch writes a batch of n ab ACs into a fresh folder, header holding the
// batch's top-level lines (its panel, its positions).
func writePanelBatch(t *testing.T, n int, header string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("version: 1\nname: spend\n" + header + "acs:\n")
	for i := range n {
		for _, side := range []string{"o", "r"} {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d.md", side, i)), []byte(fmt.Sprintf("# %s %d\nItem %d.\n", side, i, i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&b, "  - {id: AC-%d, criterion: the notes are clear, ours: o%d.md, reference: r%d.md}\n", i+1, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunSpend: the all-in-one run judges any panel by default, as it always did (its one
// user spends its own key); told what the batch may spend, by flag or variable, it refuses
// a batch that asks for more before judging anything (exit 2).
func TestRunSpend(t *testing.T) {
	panel := writePanelBatch(t, 2, "judges: [gpt-4o, llama3]\n")
	stdout, stderr, code := run(t, "", "run", panel, "--out", t.TempDir(), "--json")
	var res struct {
		Summary struct{ Compared int } `json:"summary"`
		Judges  []string               `json:"judges"`
	}
	if code == 2 || json.Unmarshal([]byte(stdout), &res) != nil || res.Summary.Compared != 2 || strings.Join(res.Judges, ",") != "scripted/gpt-4o,scripted/llama3" {
		t.Fatalf("a panel by default: exit %d, %+v\n%s\n%s", code, res, stdout, stderr)
	}

	_, stderr, code = run(t, "", "run", panel, "--out", t.TempDir(), "--allowed-models", "gpt-4o")
	if want := `batch.yaml: judges[1]: model "llama3" is not allowed on this deployment (allowed: gpt-4o)`; code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "nothing was published") {
		t.Fatalf("an unlisted model: exit %d, want 2 and %s\n%s", code, want, stderr)
	}
	swapped := writePanelBatch(t, 1, "positions: swap\njudges: [gpt-4o, llama3]\n")
	_, stderr, code = runEnv(t, "", []string{"TRIBUNAL_EPHEMERAL=true", "TRIBUNAL_MAX_CALLS_PER_AC=4"}, "run", swapped, "--out", t.TempDir())
	if want := "AC-1 would make up to 8 judge calls (2 models × 2 orders × 2 with the repair re-ask); this deployment allows 4 per AC (--max-calls-per-ac)"; code != 2 || !strings.Contains(stderr, want) {
		t.Fatalf("over the cap: exit %d, want 2 and %s\n%s", code, want, stderr)
	}
	if _, stderr, code = run(t, "", "run", panel, "--tenant-models", "gpt-4o"); code != 2 || !strings.Contains(stderr, "want team=model") {
		t.Fatalf("a bad --tenant-models: exit %d\n%s", code, stderr)
	}
}

// TestSubmitSpend: a direct submission is checked before anything is published, with a
// shared deployment's defaults (nothing but the judge service's own model, 16 calls per
// AC) or the TRIBUNAL_* variables an operator shares with the services. A submission that
// skips the check (told any model goes) meets the services' own check: each AC is
// blocked with the model and the field, and no provider call is made.
func TestSubmitSpend(t *testing.T) {
	natsURL, blobURL, health := serveStack(t)
	conn := []string{"--nats", natsURL, "--blob", blobURL}
	panel := writePanelBatch(t, 2, "judges: [gpt-4o]\n")

	_, stderr, code := run(t, "", append([]string{"submit", panel}, conn...)...)
	if want := `judges[0]: model "gpt-4o" is not allowed on this deployment (allowed: none by name: leave judges empty for the judge service's default model)`; code != 2 || !strings.Contains(stderr, want) {
		t.Fatalf("the default: exit %d, want 2 and %s\n%s", code, want, stderr)
	}
	_, stderr, code = runEnv(t, "", []string{"TRIBUNAL_ALLOWED_MODELS=gpt-4.1,o1-mini"}, append([]string{"submit", panel}, conn...)...)
	if want := `model "gpt-4o" is not allowed on this deployment (allowed: gpt-4.1, o1-mini)`; code != 2 || !strings.Contains(stderr, want) {
		t.Fatalf("TRIBUNAL_ALLOWED_MODELS: exit %d, want 2 and %s\n%s", code, want, stderr)
	}
	if n := streamMessages(t, natsURL); n != 0 {
		t.Fatalf("refused submissions published %d events", n)
	}

	stdout, stderr, code := run(t, "", append([]string{"submit", panel, "--allowed-models", "*"}, conn...)...)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	out := t.TempDir()
	if _, stderr, code = run(t, "", append([]string{"watch", "--batch", id}, conn...)...); code != 4 {
		t.Fatalf("watch exit %d, want 4 (every AC blocked)\n%s", code, stderr)
	}
	stdout, _, _ = run(t, "", append([]string{"results", "--batch", id, "--json", "--out", out}, conn...)...)
	var res struct {
		Rows []struct {
			Status, Reason string
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Rows) != 2 {
		t.Fatalf("results: %v\n%s", err, stdout)
	}
	for _, r := range res.Rows {
		if r.Status != "blocked" || !strings.Contains(r.Reason, `ab.judges[0]: model "gpt-4o" is not allowed on this deployment (allowed: fixed-A (the default))`) {
			t.Errorf("row %+v", r)
		}
	}
	if got := metric(t, health, "tribunal_provider_calls_total"); got != 0 {
		t.Errorf("%v provider calls", got)
	}
	if got := metric(t, health, "tribunal_refusals_total", `service="renderer"`, `reason="model_not_allowed"`); got != 2 {
		t.Errorf("renderer refusals %v, want 2", got)
	}
}

// streamMessages is how many events the services' stream holds.
func streamMessages(t *testing.T, url string) uint64 {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// metric sums the series of name on health's /metrics that carry every label of want
// (`service="renderer"`), 0 when there are none.
func metric(t *testing.T, health, name string, want ...string) float64 {
	t.Helper()
	code, body := status("http://" + health + "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, w := range want {
			match = match && strings.Contains(series, w)
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); match && err == nil {
			sum += v
		}
	}
	return sum
}
