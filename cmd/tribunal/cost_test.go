package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// The test model's price, USD per million tokens, and the same in nano-dollars per token
// for the test's own arithmetic.
const (
	testPrice                    = "judge-model=1.25/0.125/10.00"
	nanoPerPrompt, nanoPerAnswer = 1250, 10000
)

// writeCriticBatch writes a batch of n critic ACs with inline outputs, and budget when
// it is not empty, and returns its path.
func writeCriticBatch(t *testing.T, dir string, n int, budget string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("version: 1\nname: costs\n")
	if budget != "" {
		fmt.Fprintf(&b, "budget: %s\n", budget)
	}
	b.WriteString("acs:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: AC-%d\n    kind: critic\n    task: Summarise release %d.0 for a customer in one sentence.\n    output: Release %d.0 makes exports faster.\n", i, i, i)
	}
	p := filepath.Join(dir, "batch.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// costJSON is a price.Sum as results.json and the report print it.
type costJSON struct {
	USD              string `json:"usd"`
	NanoUSD          *int64 `json:"nano_usd"`
	PricedCalls      int    `json:"priced_calls"`
	UnpricedCalls    int    `json:"unpriced_calls"`
	CacheHits        int    `json:"cache_hits"`
	SavedNanoUSD     int64  `json:"saved_nano_usd"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CachedTokens     int64  `json:"cached_prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

// byHand is what c's tokens cost at the test's price, computed here, apart from
// tribunal's price code.
func (c costJSON) byHand() int64 {
	return (c.PromptTokens-c.CachedTokens)*nanoPerPrompt + c.CachedTokens*125 + c.CompletionTokens*nanoPerAnswer
}

// namedCostJSON is one part of a batch's costs: a judge's, a kind's or a team's.
type namedCostJSON struct {
	Judge  string   `json:"judge"`
	Kind   string   `json:"kind"`
	Tenant string   `json:"tenant"`
	Cost   costJSON `json:"cost"`
}

// part is the cost of the part named name (a judge, a kind or a team).
func part(parts []namedCostJSON, name string) costJSON {
	for _, p := range parts {
		if p.Judge == name || p.Kind == name || p.Tenant == name {
			return p.Cost
		}
	}
	return costJSON{}
}

type costResults struct {
	BatchID string `json:"batch_id"`
	Cost    struct {
		Total       costJSON        `json:"total"`
		ByJudge     []namedCostJSON `json:"by_judge"`
		PriceTables []string        `json:"price_tables"`
	} `json:"cost"`
	Rows []struct {
		ACID   string    `json:"ac_id"`
		Status string    `json:"status"`
		Reason string    `json:"reason"`
		Cost   *costJSON `json:"cost"`
	} `json:"results"`
}

func readCostResults(t *testing.T, out string) costResults {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "costs-*", "results.json"))
	if len(files) != 1 {
		t.Fatalf("results files %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var r costResults
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCostOfAPricedBatch is issue 26's first must-show: a batch judged by a priced model
// gives, in results.json and in `tribunal report --json`, the cost of each AC, of the
// judge and of the batch, and each equals the tokens the provider reported times the
// table's prices, computed here.
func TestCostOfAPricedBatch(t *testing.T) {
	llm := fakellm.New(fakellm.Options{Respond: answerByKind})
	defer llm.Close()
	dir := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "sk-local")
	batchFile := writeCriticBatch(t, dir, 4, "")
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runState(t, dir, "run", batchFile, "--judge", "openai", "--judge-model", "judge-model",
		"--openai-base-url", llm.BaseURL(), "--price", testPrice, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "cost: ") || !strings.Contains(stdout, "COST") {
		t.Errorf("the results table shows no cost:\n%s", stdout)
	}
	r := readCostResults(t, out)
	var sum int64
	for _, row := range r.Rows {
		c := row.Cost
		if c == nil || c.NanoUSD == nil || c.PromptTokens == 0 || c.CompletionTokens == 0 {
			t.Fatalf("%s: cost %+v: want a priced call's tokens and money", row.ACID, c)
		}
		if *c.NanoUSD != c.byHand() {
			t.Errorf("%s: cost %d nano-USD, tokens × prices = %d", row.ACID, *c.NanoUSD, c.byHand())
		}
		sum += *c.NanoUSD
	}
	total := r.Cost.Total
	if total.NanoUSD == nil || *total.NanoUSD != sum || total.byHand() != sum || total.PricedCalls != 4 || total.UnpricedCalls != 0 {
		t.Errorf("batch cost %+v: want the ACs' sum %d", total, sum)
	}
	if j := part(r.Cost.ByJudge, "openai/judge-model"); j.NanoUSD == nil || *j.NanoUSD != sum {
		t.Errorf("judge cost %+v: want %d", j, sum)
	}
	if len(r.Cost.PriceTables) != 1 || !strings.HasPrefix(r.Cost.PriceTables[0], "prices-") {
		t.Errorf("price tables %v: want the one version the calls were priced with", r.Cost.PriceTables)
	}

	stdout, stderr, code = runState(t, dir, "report", "--batch", r.BatchID, "--json")
	if code != 0 {
		t.Fatalf("report exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Judges []struct {
			Judge string `json:"judge"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		} `json:"judges"`
		Cost struct {
			Total   costJSON        `json:"total"`
			ByJudge []namedCostJSON `json:"by_judge"`
			ByKind  []namedCostJSON `json:"by_kind"`
		} `json:"cost"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if c := rep.Cost.Total; c.NanoUSD == nil || *c.NanoUSD != sum {
		t.Errorf("report: batch cost %+v, want %d", c, sum)
	}
	if c := part(rep.Cost.ByKind, "critic"); c.NanoUSD == nil || *c.NanoUSD != sum {
		t.Errorf("report: critic cost %+v, want %d", c, sum)
	}
	// The usage figures the report computes on their own give the same money.
	for _, j := range rep.Judges {
		c := part(rep.Cost.ByJudge, j.Judge)
		byUsage := j.Usage.PromptTokens*nanoPerPrompt + j.Usage.CompletionTokens*nanoPerAnswer
		if c.NanoUSD == nil || *c.NanoUSD != byUsage {
			t.Errorf("report: judge %s costs %+v, its usage × prices is %d", j.Judge, c, byUsage)
		}
	}

	// tribunal view: the batch's cost on its page, and the team's cost by day.
	if stdout, stderr, code := runState(t, dir, "view", "--export", "site"); code != 0 {
		t.Fatalf("view --export: exit %d\n%s\n%s", code, stdout, stderr)
	}
	index, err := os.ReadFile(filepath.Join(dir, "site", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), "Cost by day") || !strings.Contains(string(index), total.USD+" USD") {
		t.Errorf("the console's batch list shows no cost of %s USD by day", total.USD)
	}
	found := false
	_ = filepath.Walk(filepath.Join(dir, "site"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".html") {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), `id="batch-cost"`) && strings.Contains(string(data), total.USD+" USD") {
				found = true
			}
		}
		return nil
	})
	if !found {
		t.Errorf("no batch page of the export shows the batch's cost %s USD", total.USD)
	}
}

// TestBudgetStopsSpending is issue 26's second must-show: a batch budget of less than the
// batch's cost. The fake provider receives no request past it (the server counts them),
// the remaining ACs are blocked "budget exhausted" with the figures, the batch completes
// with the documented exit code (1: some ACs blocked), and `tribunal audit` re-derives
// the stop. Raised, the same batch pays only for the ACs that were not judged: the
// others come from the judge-call cache, free.
func TestBudgetStopsSpending(t *testing.T) {
	llm := fakellm.New(fakellm.Options{Respond: answerByKind})
	defer llm.Close()
	dir := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "sk-local")
	const n = 6
	// A call's estimate is about 0.004 USD (every prompt byte a token, 64 answer tokens);
	// what it costs is about a quarter of that: the budget lets a few calls through.
	batchFile := writeCriticBatch(t, dir, n, "0.008 USD")
	out := filepath.Join(dir, "out")
	args := []string{"run", batchFile, "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", llm.BaseURL(),
		"--price", testPrice, "--judge-max-tokens", "64", "--out", out}
	stdout, stderr, code := runState(t, dir, args...)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (some ACs blocked)\n%s\n%s", code, stdout, stderr)
	}
	r := readCostResults(t, out)
	judged, blocked := 0, 0
	for _, row := range r.Rows {
		switch row.Status {
		case "compared":
			judged++
		case "blocked":
			blocked++
			if !strings.HasPrefix(row.Reason, "budget exhausted: the batch's budget is 0.008 USD; ") || !strings.Contains(row.Reason, "spent") {
				t.Errorf("%s blocked with %q: want the budget exhausted, with its figures", row.ACID, row.Reason)
			}
		default:
			t.Errorf("%s: status %s", row.ACID, row.Status)
		}
	}
	if judged == 0 || blocked == 0 {
		t.Fatalf("%d judged, %d blocked: want the budget to stop the batch part way\n%s", judged, blocked, stdout)
	}
	if got := llm.Calls(); got != judged {
		t.Errorf("the provider received %d requests for %d judged ACs: a request went past the budget", got, judged)
	}
	if spent := r.Cost.Total; spent.NanoUSD == nil || *spent.NanoUSD > 8_000_000 {
		t.Errorf("spent %+v of a 0.008 USD budget", spent)
	}
	if aout, stderr, code := runState(t, dir, "audit", "--batch", r.BatchID); code != 0 {
		t.Errorf("audit of the budget-stopped batch: exit %d\n%s\n%s", code, aout, stderr)
	}

	// Raised: only the blocked ACs reach the provider.
	writeCriticBatch(t, dir, n, "1.00 USD")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	before := llm.Calls()
	stdout, stderr, code = runState(t, dir, args...)
	if code != 0 {
		t.Fatalf("rerun exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := llm.Calls() - before; got != blocked {
		t.Errorf("the rerun sent %d requests, want %d (the ACs the budget blocked)", got, blocked)
	}
	r2 := readCostResults(t, out)
	var paid int64
	for _, row := range r2.Rows {
		if row.Status != "compared" || row.Cost == nil || row.Cost.NanoUSD == nil {
			t.Fatalf("rerun %s: %s, cost %+v", row.ACID, row.Status, row.Cost)
		}
		if row.Cost.CacheHits == 1 {
			if *row.Cost.NanoUSD != 0 || row.Cost.SavedNanoUSD == 0 {
				t.Errorf("rerun %s from the cache: cost %+v, want 0 and what it saved", row.ACID, row.Cost)
			}
			continue
		}
		paid += *row.Cost.NanoUSD
	}
	if c := r2.Cost.Total; c.NanoUSD == nil || *c.NanoUSD != paid || c.CacheHits != judged {
		t.Errorf("rerun cost %+v: want only the %d new calls' %d nano-USD", c, blocked, paid)
	}
}

// TestEstimateBeforeRun: `tribunal validate` and `run --dry-run` give the batch's calls,
// tokens and money at the judge's price, and the money is those tokens × the prices.
func TestEstimateBeforeRun(t *testing.T) {
	dir := t.TempDir()
	batchFile := writeCriticBatch(t, dir, 3, "")
	stdout, stderr, code := run(t, dir, "validate", batchFile, "--json", "--judge", "openai", "--judge-model", "judge-model", "--price", testPrice)
	if code != 0 {
		t.Fatalf("validate exit %d\n%s\n%s", code, stdout, stderr)
	}
	var plan struct {
		JudgeCalls       int      `json:"judge_calls"`
		PromptTokens     int64    `json:"prompt_tokens"`
		CompletionTokens int64    `json:"completion_tokens"`
		Cost             costJSON `json:"cost"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	want := plan.PromptTokens*nanoPerPrompt + plan.CompletionTokens*nanoPerAnswer
	if plan.JudgeCalls != 3 || plan.PromptTokens == 0 || plan.Cost.NanoUSD == nil || *plan.Cost.NanoUSD != want {
		t.Errorf("plan %+v: want 3 calls and tokens × prices = %d nano-USD", plan, want)
	}
	stdout, stderr, code = run(t, dir, "run", batchFile, "--dry-run", "--judge", "openai", "--judge-model", "gpt-4o-mini")
	if code != 0 || !strings.Contains(stdout, "3 judge calls") || !strings.Contains(stdout, " USD at prices prices-") {
		t.Errorf("run --dry-run exit %d:\n%s\n%s", code, stdout, stderr)
	}
	stdout, _, _ = run(t, dir, "run", batchFile, "--dry-run", "--judge", "openai", "--judge-model", "my-local-model")
	if !strings.Contains(stdout, "unpriced") {
		t.Errorf("an unpriced model's estimate: want unpriced, never free:\n%s", stdout)
	}
}
