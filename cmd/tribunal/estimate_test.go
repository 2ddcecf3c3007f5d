package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/price"
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

// TestEstimateLadderInMoney: a ladder's estimate is a range in money, from its first rung
// only to every rung asked for every AC, each rung at its own model's price (figures
// computed here from the AC's files and the prices given); a rung without a price makes
// the upper bound unpriced calls, never 0.
func TestEstimateLadderInMoney(t *testing.T) {
	dir := t.TempDir()
	batchFile := writeABBatch(t, dir, "est", "trials: 3\nladder: [cheap, strong]\nescalate_when:\n  disagreement: true\n", 2)
	// Nano-dollars per token: 0.15 and 0.60, 2.50 and 10.00 USD per million.
	const cheapPrice, strongPrice = "cheap=0.15/0.075/0.60", "strong=2.50/1.25/10.00"
	const cheapIn, cheapOut, strongIn, strongOut = 150, 600, 2500, 10000
	// Each AC: 3 trials, one call a trial at a rung; its prompt is the kind's instructions
	// and its two files at four bytes a token.
	var least, worst int64
	for i := 1; i <= 2; i++ {
		perCall := int64(client.EstimatePromptTokens)
		for _, side := range []string{"ours", "ref"} {
			fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%s-%d.md", side, i)))
			if err != nil {
				t.Fatal(err)
			}
			perCall += (fi.Size() + 3) / 4
		}
		cheap := 3*perCall*cheapIn + 3*client.EstimateAnswerTokens*cheapOut
		strong := 3*perCall*strongIn + 3*client.EstimateAnswerTokens*strongOut
		least += cheap
		worst += cheap + strong
	}
	type plan struct {
		Cost    costJSON  `json:"cost"`
		MaxCost *costJSON `json:"max_cost"`
		ACs     []struct {
			Ladder  []string  `json:"ladder"`
			MaxCost *costJSON `json:"max_cost"`
		} `json:"acs"`
	}
	for _, args := range [][]string{{"validate", batchFile}, {"run", "--dry-run", batchFile}} {
		stdout, stderr, code := run(t, dir, append(args, "--json", "--judge", "openai", "--judge-model", "cheap", "--price", cheapPrice, "--price", strongPrice)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		var p plan
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stdout)
		}
		if p.Cost.NanoUSD == nil || *p.Cost.NanoUSD != least || p.Cost.PricedCalls != 6 {
			t.Errorf("%v: least %+v: want %d nano-USD over 6 calls (the cheap rung only)", args, p.Cost, least)
		}
		if p.MaxCost == nil || p.MaxCost.NanoUSD == nil || *p.MaxCost.NanoUSD != worst || p.MaxCost.PricedCalls != 12 || p.MaxCost.UnpricedCalls != 0 {
			t.Errorf("%v: worst %+v: want %d nano-USD over 12 calls (every rung at its price)", args, p.MaxCost, worst)
		}
		if len(p.ACs) != 2 || strings.Join(p.ACs[0].Ladder, ",") != "cheap,strong" || p.ACs[0].MaxCost == nil {
			t.Errorf("%v: ACs %+v: want each with its ladder and worst case", args, p.ACs)
		}
		stdout, stderr, code = run(t, dir, append(args, "--judge", "openai", "--judge-model", "cheap", "--price", cheapPrice, "--price", strongPrice)...)
		if code != 0 || !strings.Contains(stdout, "if every rung of the judge ladder is asked for every AC") || !strings.Contains(stdout, "about "+price.Money(worst).String()) {
			t.Errorf("%v text: exit %d, want the worst case at %s\n%s\n%s", args, code, price.Money(worst), stdout, stderr)
		}
	}
	// Without the strong rung's price the upper bound is not 0: its calls are unpriced.
	stdout, stderr, code := run(t, dir, "validate", batchFile, "--json", "--judge", "openai", "--judge-model", "cheap", "--price", cheapPrice)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var p plan
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	if p.MaxCost == nil || p.MaxCost.UnpricedCalls != 6 || p.MaxCost.PricedCalls != 6 || p.MaxCost.NanoUSD == nil || *p.MaxCost.NanoUSD != least {
		t.Errorf("worst without the strong price %+v: want the cheap rung's %d nano-USD and 6 unpriced calls", p.MaxCost, least)
	}
	stdout, _, _ = run(t, dir, "validate", batchFile, "--judge", "openai", "--judge-model", "cheap", "--price", cheapPrice)
	if !strings.Contains(stdout, "6 unpriced calls") {
		t.Errorf("text without the unpriced rung:\n%s", stdout)
	}
}
