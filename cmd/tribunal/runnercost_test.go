package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// TestCostOfEquivalenceRunner: an equivalence AC's cost includes the runner's calls at
// the runner model's price beside the judge's at the judge model's: the AC's and the
// batch's cost equal the tokens the server reported for each model times its price,
// computed here; the report's by-judge line shows the runner model's part; and the
// audit re-derives it clean.
func TestCostOfEquivalenceRunner(t *testing.T) {
	llm := fakellm.NewUnstarted(fakellm.Options{Respond: answerByKind})
	// What the server reported, by model, read off its answers.
	var mu sync.Mutex
	tokens := map[string][2]int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		llm.Handler().ServeHTTP(rec, r)
		var body struct {
			Model string `json:"model"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &body) == nil && body.Model != "" {
			mu.Lock()
			u := tokens[body.Model]
			tokens[body.Model] = [2]int64{u[0] + body.Usage.PromptTokens, u[1] + body.Usage.CompletionTokens}
			mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	p := filepath.Join(dir, "examples", "quickstart", "costs.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nname: costs\nacs:\n  - id: AC-12\n    kind: equivalence\n    original: skill/original.md\n    candidate: skill/candidate.md\n    cases_file: skill/cases.yaml\n    runner_model: runner-model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Nano-dollars per token: judge 1.25 and 10.00, runner 0.40 and 1.60 USD per million.
	const runnerPrice = "runner-model=0.40/0.20/1.60"
	// The estimate prices the runner's calls at the runner model too: unpriced without
	// its price, priced with it.
	for _, prices := range [][]string{{"--price", testPrice}, {"--price", testPrice, "--price", runnerPrice}} {
		stdout, stderr, code := runState(t, dir, append([]string{"validate", p, "--json", "--judge", "openai", "--judge-model", "judge-model"}, prices...)...)
		var plan struct {
			RunnerCalls int      `json:"runner_calls"`
			Cost        costJSON `json:"cost"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &plan) != nil || plan.RunnerCalls == 0 {
			t.Fatalf("validate %v: exit %d\n%s\n%s", prices, code, stdout, stderr)
		}
		if want := map[int]int{2: plan.RunnerCalls, 4: 0}[len(prices)]; plan.Cost.UnpricedCalls != want {
			t.Errorf("validate %v: %d unpriced calls, want %d (the runner's %d at runner-model)", prices, plan.Cost.UnpricedCalls, want, plan.RunnerCalls)
		}
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runState(t, dir, "run", p, "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", srv.URL+"/v1",
		"--price", testPrice, "--price", runnerPrice, "--out", out)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	runner, judged := tokens["runner-model"], tokens["judge-model"]
	if runner[0] == 0 || judged[0] == 0 {
		t.Fatalf("tokens by model %v: want both the runner's and the judge's calls", tokens)
	}
	runnerCost := runner[0]*400 + runner[1]*1600
	want := runnerCost + judged[0]*nanoPerPrompt + judged[1]*nanoPerAnswer
	r := readCostResults(t, out)
	if len(r.Rows) != 1 || r.Rows[0].Cost == nil || r.Rows[0].Cost.NanoUSD == nil || *r.Rows[0].Cost.NanoUSD != want {
		t.Fatalf("AC cost %+v: want %d nano-USD (runner %v tokens, judge %v)", r.Rows[0].Cost, want, runner, judged)
	}
	if r.Cost.Total.NanoUSD == nil || *r.Cost.Total.NanoUSD != want {
		t.Errorf("batch cost %+v: want %d nano-USD", r.Cost.Total, want)
	}
	if c := part(r.Cost.ByJudge, "openai/runner-model"); c.NanoUSD == nil || *c.NanoUSD != runnerCost || c.PromptTokens != runner[0] || c.CompletionTokens != runner[1] {
		t.Errorf("by judge %+v: want the runner model's %d nano-USD from %v tokens", r.Cost.ByJudge, runnerCost, runner)
	}
	stdout, stderr, code = runState(t, dir, "report", "--batch", r.BatchID, "--json", "--price", testPrice, "--price", runnerPrice)
	if code != 0 || !bytes.Contains([]byte(stdout), []byte(`"openai/runner-model"`)) {
		t.Errorf("report: exit %d, want the runner model's line\n%s\n%s", code, stdout, stderr)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", r.BatchID); code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
