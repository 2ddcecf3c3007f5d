package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestEstimateBatchDiscount: a batch whose judge_mode is batch, or a run whose
// --judge-mode is, is estimated at the provider's batch discount, and the estimate says
// so; the same batch judged directly is estimated at the full price.
func TestEstimateBatchDiscount(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"direct", "batched"} {
		if err := os.Mkdir(dir+"/"+sub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	direct := writeCriticBatch(t, dir+"/direct", 3, "")
	batched := writeCriticBatch(t, dir+"/batched", 3, "")
	data, err := os.ReadFile(batched)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(batched, []byte(strings.Replace(string(data), "version: 1\n", "version: 1\njudge_mode: batch\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// 40 % off at the batch API.
	const discounted = testPrice + "/40"
	estimate := func(args ...string) (nano int64, batchAPI bool) {
		t.Helper()
		stdout, stderr, code := run(t, dir, append(args, "--json", "--judge", "openai", "--judge-model", "judge-model", "--price", discounted)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		var plan struct {
			PromptTokens     int64    `json:"prompt_tokens"`
			CompletionTokens int64    `json:"completion_tokens"`
			Cost             costJSON `json:"cost"`
			BatchAPI         bool     `json:"batch_api"`
		}
		if err := json.Unmarshal([]byte(stdout), &plan); err != nil || plan.Cost.NanoUSD == nil {
			t.Fatalf("%v: %v\n%s", args, err, stdout)
		}
		full := plan.PromptTokens*nanoPerPrompt + plan.CompletionTokens*nanoPerAnswer
		if plan.BatchAPI {
			full = (full*60 + 50) / 100
		}
		if *plan.Cost.NanoUSD != full {
			t.Errorf("%v: %d nano-USD, want %d (batch API %v)", args, *plan.Cost.NanoUSD, full, plan.BatchAPI)
		}
		return *plan.Cost.NanoUSD, plan.BatchAPI
	}
	full, viaBatch := estimate("validate", direct)
	if viaBatch {
		t.Errorf("a batch with no judge_mode estimated through the batch API")
	}
	if got, viaBatch := estimate("validate", batched); !viaBatch || got >= full {
		t.Errorf("judge_mode: batch: %d nano-USD (batch API %v), want less than %d", got, viaBatch, full)
	}
	if got, viaBatch := estimate("run", direct, "--dry-run", "--judge-mode", "batch"); !viaBatch || got >= full {
		t.Errorf("run --judge-mode batch --dry-run: %d nano-USD (batch API %v), want less than %d", got, viaBatch, full)
	}
	if _, viaBatch := estimate("run", batched, "--dry-run", "--judge-allow-batch=false"); viaBatch {
		t.Errorf("a run that refuses batch mode estimated its batch through the batch API")
	}
	stdout, stderr, code := run(t, dir, "validate", batched, "--judge", "openai", "--judge-model", "judge-model", "--price", discounted)
	if code != 0 || !strings.Contains(stdout, "the judge calls at the provider's batch discount (judge_mode: batch)") {
		t.Errorf("validate's text: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
