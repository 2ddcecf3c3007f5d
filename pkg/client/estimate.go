package client

import (
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// A plan's token estimate is rough by design: it is what a batch will about cost, for
// deciding whether to run it and what budget to give it, not a bound (the budget's own
// reservation is the bound, pkg/budget). Text is counted at four bytes a token, the
// rule of thumb of the OpenAI tokenizers for English.
const (
	// EstimatePromptTokens is a call's prompt beside its artifacts: the kind's
	// instructions (the longest, ab's, are about 4.5 KB) and the answer schema.
	EstimatePromptTokens = 1200
	// EstimateImageTokens is one image artifact (OpenAI's high-detail 1024 × 1024 is 765).
	EstimateImageTokens = 1000
	// EstimateAnswerTokens is one answer: a verdict with its reasoning.
	EstimateAnswerTokens = 300
	// EstimateRunnerAnswerTokens is one equivalence runner transcript.
	EstimateRunnerAnswerTokens = 800
)

// estimateTokens fills each AC's and the plan's token estimate from the calls and the
// artifacts planned. An artifact named by URL is not read before the run and counts for
// nothing.
func (p *Plan) estimateTokens() {
	p.PromptTokens, p.CompletionTokens = 0, 0
	for i := range p.ACs {
		pa := &p.ACs[i]
		perCall := int64(EstimatePromptTokens)
		for _, a := range pa.Artifacts {
			switch a.Class {
			case "image":
				perCall += EstimateImageTokens
			case "remote":
			default:
				perCall += (a.Size + 3) / 4
			}
		}
		pa.PromptTokens = int64(pa.JudgeCalls+pa.RunnerCalls) * perCall
		pa.CompletionTokens = int64(pa.JudgeCalls)*EstimateAnswerTokens + int64(pa.RunnerCalls)*EstimateRunnerAnswerTokens
		p.PromptTokens += pa.PromptTokens
		p.CompletionTokens += pa.CompletionTokens
	}
}

// Price prices the plan's token estimate at table's prices for provider: each AC's calls
// split evenly over its panel's models, defaultModel for an AC naming none and for the
// equivalence runner. A model without a price leaves its share unpriced. batchAPI prices
// the judge calls as made through the provider's batch API (judge_mode: batch), at the
// table's batch discount; the runner's calls are made directly whatever the mode.
func (p *Plan) Price(table *price.Table, provider, defaultModel string, batchAPI bool) {
	total := price.Sum{}
	p.PriceTable, p.BatchAPI = table.Version(), batchAPI
	for i := range p.ACs {
		pa := &p.ACs[i]
		if pa.JudgeCalls+pa.RunnerCalls == 0 {
			pa.Cost = nil
			continue
		}
		models := pa.Judges
		if len(models) == 0 {
			models = []string{defaultModel}
		}
		var s price.Sum
		share := func(model string, calls int, prompt, completion int64, batch bool) {
			if calls == 0 {
				return
			}
			part := price.Sum{PromptTokens: prompt, CompletionTokens: completion}
			// The scripted judge names no model, and asks none.
			if pr, ok := table.Lookup(provider, model); ok && (model != "" || price.Recorded(provider)) {
				part.Cost = pr.Cost(price.Usage{PromptTokens: int(prompt), CompletionTokens: int(completion), Batch: batch})
				part.Priced = calls
				if price.Recorded(provider) {
					part.Recorded = calls
				}
			} else {
				part.Unpriced = calls
			}
			s.Add(part)
		}
		calls := pa.JudgeCalls + pa.RunnerCalls
		judgePrompt := pa.PromptTokens * int64(pa.JudgeCalls) / int64(calls)
		judgeAnswer := int64(pa.JudgeCalls) * EstimateAnswerTokens
		for k, m := range models {
			n := pa.JudgeCalls / len(models)
			if k < pa.JudgeCalls%len(models) {
				n++
			}
			share(m, n, judgePrompt*int64(n)/int64(max(pa.JudgeCalls, 1)), judgeAnswer*int64(n)/int64(max(pa.JudgeCalls, 1)), batchAPI)
		}
		share(defaultModel, pa.RunnerCalls, pa.PromptTokens-judgePrompt, pa.CompletionTokens-judgeAnswer, false)
		pa.Cost = &s
		total.Add(s)
	}
	p.Cost = &total
}
