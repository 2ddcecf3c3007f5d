package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// writeABBatch writes an ab batch named name with header lines and n ACs (AC-1...AC-n),
// each comparing two short notes, and returns its path.
func writeABBatch(t *testing.T, dir, name, header string, n int) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nname: %s\n%sacs:\n", name, header)
	for i := 1; i <= n; i++ {
		for _, side := range []string{"ours", "ref"} {
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.md", side, i))
			if err := os.WriteFile(p, fmt.Appendf(nil, "# Release %d.0 (%s)\n\nExports are faster.\n", i, side), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&b, "  - id: AC-%d\n    criterion: the notes say what changed\n    ours: ours-%d.md\n    reference: ref-%d.md\n", i, i, i)
	}
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// trialRow is a results.json row with its trials.
type trialRow struct {
	ACID   string `json:"ac_id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	Winner string `json:"winner"`
	Trials *struct {
		Reducer   string   `json:"reducer"`
		Answers   []string `json:"answers"`
		Answer    string   `json:"answer"`
		For       int      `json:"for"`
		Agreement float64  `json:"agreement"`
	} `json:"trials"`
	Ladder *struct {
		Rungs   []string `json:"rungs"`
		Decided int      `json:"decided"`
		Why     []string `json:"why"`
		Answers []string `json:"answers"`
	} `json:"ladder"`
	Unsure []string  `json:"unsure"`
	Cost   *costJSON `json:"cost"`
}

type trialResults struct {
	BatchID string     `json:"batch_id"`
	Rows    []trialRow `json:"results"`
}

func readTrialResults(t *testing.T, out, name string) trialResults {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, name+"-*", "results.json"))
	if len(files) != 1 {
		t.Fatalf("results files %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var r trialResults
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTrialsMajority is issue 26's must-show for repeated trials: `trials: 5` on an AC
// whose test model answers A, A, B, A, B (one answer per call, at the fake server) gives
// the majority's verdict, records the five answers and an agreement of 0.6, each trial
// asked with its own seed; the report gives the judge's stability with an interval; the
// audit re-derives it clean; and a rerun is answered from the cache trial by trial.
func TestTrialsMajority(t *testing.T) {
	script := []string{"A", "A", "B", "A", "B"}
	var mu sync.Mutex
	var seeds []string
	llm := fakellm.New(fakellm.Options{Respond: func(req openai.ChatCompletionRequest, n int) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		seed := "none"
		if req.Seed != nil {
			seed = fmt.Sprint(*req.Seed)
		}
		seeds = append(seeds, seed)
		return fakellm.Reply{Content: fakellm.Verdict(script[(n-1)%len(script)], 0.9)}
	}})
	defer llm.Close()
	dir := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "sk-local")
	batchFile := writeABBatch(t, dir, "trials", "trials: 5\n", 1)
	out := filepath.Join(dir, "out")
	args := []string{"run", batchFile, "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", llm.BaseURL(), "--price", testPrice, "--out", out}
	stdout, stderr, code := runState(t, dir, args...)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if llm.Calls() != 5 {
		t.Fatalf("the fake server saw %d requests, want 5 (one per trial)", llm.Calls())
	}
	if got := strings.Join(seeds, ","); got != "none,1,2,3,4" {
		t.Errorf("seeds sent %s: want none for the first trial, then 1..4", got)
	}
	r := readTrialResults(t, out, "trials")
	row := r.Rows[0]
	want := string(ab.Unshuffle("A", ab.Assign("AC-1", 0)))
	other := string(ab.Unshuffle("B", ab.Assign("AC-1", 0)))
	if row.Status != "compared" || row.Winner != want || row.Trials == nil {
		t.Fatalf("row %+v: want compared, winner %s (slot A) with trials", row, want)
	}
	if tr := row.Trials; tr.Reducer != "majority" || strings.Join(tr.Answers, ",") != strings.Join([]string{want, want, other, want, other}, ",") || tr.Agreement != 0.6 || tr.For != 3 {
		t.Errorf("trials %+v: want majority over 5 answers, agreement 0.6", tr)
	}
	if len(row.Unsure) != 1 || !strings.Contains(row.Unsure[0], "3 of 5") {
		t.Errorf("unsure %q: want the trial disagreement", row.Unsure)
	}
	if row.Cost == nil || row.Cost.PricedCalls != 5 {
		t.Errorf("cost %+v: want 5 priced calls", row.Cost)
	}

	stdout, stderr, code = runState(t, dir, "report", "--batch", r.BatchID, "--json")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Trials []struct {
			Judge  string `json:"judge"`
			Stable struct {
				K, N   int
				Point  float64 `json:"point"`
				Lo, Hi float64
			} `json:"stable"`
			MeanAgreement float64 `json:"mean_agreement"`
		} `json:"trials"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	if len(rep.Trials) != 1 || rep.Trials[0].Judge != "openai/judge-model" || rep.Trials[0].Stable.K != 0 || rep.Trials[0].Stable.N != 1 ||
		rep.Trials[0].Stable.Hi <= 0 || rep.Trials[0].MeanAgreement != 0.6 {
		t.Errorf("report trials %+v: want 0 of 1 AC stable, an interval above 0, mean agreement 0.6\n%s", rep.Trials, stderr)
	}
	if stdout, _, _ := runState(t, dir, "report", "--batch", r.BatchID); !strings.Contains(stdout, "repeated trials: ACs whose trials all agreed") {
		t.Errorf("report text without the trials:\n%s", stdout)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", r.BatchID); code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// Again: every trial is its own cache entry, so five hits and no request.
	stdout, stderr, code = runState(t, dir, args...)
	if code != 0 && code != 1 {
		t.Fatalf("rerun: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if llm.Calls() != 5 {
		t.Errorf("the rerun asked the server %d times: want every trial from the cache", llm.Calls()-5)
	}
}

// TestTrialsValidation: at_least above the trials, and a rubric AC asking for trials,
// are refused with the field named (the rubric loop is its own repetition).
func TestTrialsValidation(t *testing.T) {
	dir := t.TempDir()
	batchFile := writeABBatch(t, dir, "bad", "trials: 3\nat_least: 5\n", 1)
	stdout, stderr, code := run(t, dir, "validate", batchFile)
	if code == 0 || !strings.Contains(stdout+stderr, "at_least") {
		t.Errorf("at_least above trials: exit %d\n%s\n%s", code, stdout, stderr)
	}
	p := filepath.Join(dir, "rubric.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nname: r\nacs:\n  - id: tasks\n    kind: rubric\n    spec: spec.json\n    trials: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = run(t, dir, "validate", p)
	if code == 0 || !strings.Contains(stdout+stderr, "trials: the rubric kind takes no trials") {
		t.Errorf("rubric trials: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestLadderEscalatesTheUnsure is issue 26's must-show for escalation: a ladder whose
// cheap model is unsure (confidence below escalate_when's) on 2 of 10 ACs asks the strong
// model for exactly those two, counted per model at the fake server; each verdict says
// which rung decided and why; and the report's coverage, counterfactual and saving equal
// what this test computes from the token counts and the prices.
func TestLadderEscalatesTheUnsure(t *testing.T) {
	unsure := map[string]bool{"3": true, "7": true}
	var mu sync.Mutex
	perModel := map[string]int{}
	llm := fakellm.New(fakellm.Options{Respond: func(req openai.ChatCompletionRequest, _ int) fakellm.Reply {
		mu.Lock()
		perModel[req.Model]++
		mu.Unlock()
		a, _ := fakellm.Slots(req)
		var release int
		_, _ = fmt.Sscanf(a, "# Release %d", &release)
		if req.Model == "cheap" && unsure[fmt.Sprint(release)] {
			return fakellm.Reply{Content: fakellm.Verdict("A", 0.4)}
		}
		return fakellm.Reply{Content: fakellm.Verdict("A", 0.9)}
	}})
	defer llm.Close()
	dir := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "sk-local")
	batchFile := writeABBatch(t, dir, "ladder", "ladder: [cheap, strong]\nescalate_when:\n  confidence: 0.7\n", 10)
	out := filepath.Join(dir, "out")
	const cheapPrice, strongPrice = "cheap=0.15/0.075/0.60", "strong=2.50/1.25/10.00"
	stdout, stderr, code := runState(t, dir, "run", batchFile, "--judge", "openai", "--judge-model", "cheap", "--openai-base-url", llm.BaseURL(),
		"--price", cheapPrice, "--price", strongPrice, "--out", out)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if perModel["cheap"] != 10 || perModel["strong"] != 2 || len(perModel) != 2 {
		t.Fatalf("requests per model %v: want cheap 10, strong 2", perModel)
	}
	r := readTrialResults(t, out, "ladder")
	var cheapOnly costJSON // the tokens of the ACs the cheap rung decided
	for _, row := range r.Rows {
		id := strings.TrimPrefix(row.ACID, "AC-")
		l := row.Ladder
		if row.Status != "compared" || l == nil || row.Cost == nil {
			t.Fatalf("%s: %+v", row.ACID, row)
		}
		if unsure[id] {
			if l.Decided != 1 || len(l.Why) != 1 || l.Why[0] != "confidence 0.40 below 0.70" || len(row.Unsure) != 1 {
				t.Errorf("%s: ladder %+v unsure %q: want the strong rung, because of the confidence", row.ACID, l, row.Unsure)
			}
			continue
		}
		if l.Decided != 0 || len(l.Why) != 0 || row.Cost.PricedCalls != 1 {
			t.Errorf("%s: ladder %+v, cost %+v: want the cheap rung alone", row.ACID, l, row.Cost)
		}
		cheapOnly.PromptTokens += row.Cost.PromptTokens
		cheapOnly.CompletionTokens += row.Cost.CompletionTokens
	}

	stdout, stderr, code = runState(t, dir, "report", "--batch", r.BatchID, "--json", "--price", cheapPrice, "--price", strongPrice)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Judges []struct {
			Judge string `json:"judge"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		} `json:"judges"`
		Ladder *struct {
			ACs      int `json:"acs"`
			Coverage []struct {
				Model   string `json:"model"`
				Calls   int    `json:"calls"`
				Decided struct{ K, N int }
			} `json:"coverage"`
			Agreement      struct{ K, N int } `json:"agreement"`
			Cost           costJSON           `json:"cost"`
			StrongForAll   *costJSON          `json:"strong_for_all"`
			Saving         *int64             `json:"saving_nano_usd"`
			Counterfactual string             `json:"counterfactual"`
		} `json:"ladder"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	l := rep.Ladder
	if l == nil || l.ACs != 10 || len(l.Coverage) != 2 || l.Coverage[0].Decided.K != 8 || l.Coverage[1].Decided.K != 2 ||
		l.Coverage[0].Calls != 10 || l.Coverage[1].Calls != 2 || l.Agreement.N != 2 || l.Agreement.K != 2 || l.Counterfactual == "" {
		t.Fatalf("ladder report %+v: want 8 of 10 decided cheap, 2 strong, both agreeing on the 2", l)
	}
	usage := map[string][2]int64{}
	for _, j := range rep.Judges {
		usage[j.Judge] = [2]int64{j.Usage.PromptTokens, j.Usage.CompletionTokens}
	}
	cheap, strong := usage["openai/cheap"], usage["openai/strong"]
	// The prices in nano-dollars per token: 0.15 and 0.60, 2.50 and 10.00 USD per million.
	actual := cheap[0]*150 + cheap[1]*600 + strong[0]*2500 + strong[1]*10000
	// Asking the strong model for everything: its own calls, plus the cheap-only ACs'
	// tokens at its price.
	counterfactual := strong[0]*2500 + strong[1]*10000 + cheapOnly.PromptTokens*2500 + cheapOnly.CompletionTokens*10000
	if l.Cost.NanoUSD == nil || *l.Cost.NanoUSD != actual {
		t.Errorf("ladder cost %+v: want %d nano-USD from the usage × prices", l.Cost, actual)
	}
	if l.StrongForAll == nil || l.StrongForAll.NanoUSD == nil || *l.StrongForAll.NanoUSD != counterfactual || l.Saving == nil || *l.Saving != counterfactual-actual || *l.Saving <= 0 {
		t.Errorf("strong for all %+v, saving %v: want %d and %d", l.StrongForAll, l.Saving, counterfactual, counterfactual-actual)
	}
	if stdout, _, _ := runState(t, dir, "report", "--batch", r.BatchID, "--price", cheapPrice, "--price", strongPrice); !strings.Contains(stdout, "judge ladder cheap -> strong over 10 ACs") {
		t.Errorf("report text without the ladder:\n%s", stdout)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", r.BatchID); code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestEstimateTrialsAndLadder: `validate` and `run --dry-run` count every trial, and a
// ladder from its first rung (the least) to every rung (the worst case).
func TestEstimateTrialsAndLadder(t *testing.T) {
	dir := t.TempDir()
	batchFile := writeABBatch(t, dir, "est", "trials: 3\nladder: [cheap, strong]\nescalate_when:\n  disagreement: true\n", 2)
	for _, args := range [][]string{{"validate", batchFile}, {"run", "--dry-run", batchFile}} {
		stdout, stderr, code := run(t, dir, append(args, "--json", "--judge", "openai", "--judge-model", "cheap")...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		var plan struct {
			JudgeCalls    int `json:"judge_calls"`
			MaxJudgeCalls int `json:"max_judge_calls"`
		}
		if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stdout)
		}
		if plan.JudgeCalls != 6 || plan.MaxJudgeCalls != 12 {
			t.Errorf("%v: %d to %d judge calls: want 2 ACs × 3 trials, up to × 2 rungs (6 to 12)", args, plan.JudgeCalls, plan.MaxJudgeCalls)
		}
	}
}

// TestCriticTrialsMedian: a critic AC judged with three trials takes the median of each
// score (8, 5, 9 correctness give 8), derives its verdict from the medians, and records
// each trial's own verdict and their agreement with it.
func TestCriticTrialsMedian(t *testing.T) {
	scores := []string{
		`{"correctness":8,"slop":2,"scope":8,"verdict":"pass","quality":8,"rationale":"Clear."}`,
		`{"correctness":5,"slop":2,"scope":8,"verdict":"revise","quality":5,"rationale":"Vague."}`,
		`{"correctness":9,"slop":1,"scope":9,"verdict":"pass","quality":9,"rationale":"Plain."}`,
	}
	llm := fakellm.New(fakellm.Options{Respond: func(_ openai.ChatCompletionRequest, n int) fakellm.Reply {
		return fakellm.Reply{Content: scores[(n-1)%len(scores)]}
	}})
	defer llm.Close()
	dir := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "sk-local")
	p := filepath.Join(dir, "critic.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nname: critic\nkind: critic\ntrials: 3\nacs:\n  - id: AC-1\n    task: Summarise release 1.0.\n    output: Release 1.0 makes exports faster.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runState(t, dir, "run", p, "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", llm.BaseURL(), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if llm.Calls() != 3 {
		t.Fatalf("%d requests: want one per trial", llm.Calls())
	}
	files, _ := filepath.Glob(filepath.Join(out, "critic-*", "results.json"))
	if len(files) != 1 {
		t.Fatalf("results %v", files)
	}
	data, _ := os.ReadFile(files[0])
	var r struct {
		BatchID string `json:"batch_id"`
		Rows    []struct {
			Verdict string `json:"verdict"`
			Quality *int   `json:"quality"`
			Trials  *struct {
				Reducer   string   `json:"reducer"`
				Answers   []string `json:"answers"`
				Agreement float64  `json:"agreement"`
			} `json:"trials"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	row := r.Rows[0]
	if row.Verdict != "pass" || row.Quality == nil || *row.Quality != 8 || row.Trials == nil || row.Trials.Reducer != "median" ||
		strings.Join(row.Trials.Answers, ",") != "pass,revise,pass" || row.Trials.Agreement != 2.0/3 {
		t.Fatalf("row %+v (trials %+v): want pass at quality 8 from the medians, trials pass, revise, pass", row, row.Trials)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", r.BatchID); code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestEquivalenceTrials: an equivalence AC with three trials asks the judge three times
// per case (the runner once per document and case: its transcripts are not judged
// again), and records the three trials' summaries.
func TestEquivalenceTrials(t *testing.T) {
	var mu sync.Mutex
	judged := 0
	llm := fakellm.New(fakellm.Options{Respond: func(req openai.ChatCompletionRequest, n int) fakellm.Reply {
		if req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil && req.ResponseFormat.JSONSchema.Name == "equivalence_verdict" {
			mu.Lock()
			judged++
			mu.Unlock()
		}
		return answerByKind(req, n)
	}})
	defer llm.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	p := filepath.Join(dir, "examples", "quickstart", "eq.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nname: eq\ntrials: 3\nacs:\n  - id: AC-12\n    kind: equivalence\n    original: skill/original.md\n    candidate: skill/candidate.md\n    cases_file: skill/cases.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runState(t, dir, "run", p, "--judge", "openai", "--judge-model", "judge-model", "--openai-base-url", llm.BaseURL(), "--out", out)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := readTrialResults(t, out, "eq")
	row := r.Rows[0]
	if row.Trials == nil || len(row.Trials.Answers) != 3 || row.Trials.Reducer != "majority" || row.Trials.Agreement != 1 {
		t.Fatalf("row %+v: want three agreeing trials", row)
	}
	if judged == 0 || judged%3 != 0 {
		t.Errorf("%d judge requests: want three per case", judged)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", r.BatchID); code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
