package client

import (
	"cmp"

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
// artifacts planned, at least (JudgeCalls) and at most (MaxJudgeCalls). An artifact named
// by URL is not read before the run and counts for nothing.
func (p *Plan) estimateTokens() {
	p.PromptTokens, p.CompletionTokens, p.MaxPromptTokens, p.MaxCompletionTokens = 0, 0, 0, 0
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
		pa.perCall = perCall
		runnerAnswers := int64(pa.RunnerCalls) * EstimateRunnerAnswerTokens
		pa.PromptTokens = int64(pa.JudgeCalls+pa.RunnerCalls) * perCall
		pa.CompletionTokens = int64(pa.JudgeCalls)*EstimateAnswerTokens + runnerAnswers
		pa.MaxPromptTokens = int64(pa.MaxJudgeCalls+pa.RunnerCalls) * perCall
		pa.MaxCompletionTokens = int64(pa.MaxJudgeCalls)*EstimateAnswerTokens + runnerAnswers
		p.PromptTokens += pa.PromptTokens
		p.CompletionTokens += pa.CompletionTokens
		p.MaxPromptTokens += pa.MaxPromptTokens
		p.MaxCompletionTokens += pa.MaxCompletionTokens
	}
}

// Price prices the plan's token estimate at table's prices for provider: each AC's calls
// split evenly over its panel's models, defaultModel for an AC naming none, and the
// equivalence runner's at its runner_model (defaultModel when it names none). A model without a price leaves its share unpriced. batchAPI prices
// the judge calls as made through the provider's batch API (judge_mode: batch), at the
// table's batch discount; the runner's calls are made directly whatever the mode.
//
// Cost is the least (JudgeCalls, a judge ladder's first rung only) and MaxCost the worst
// case (MaxJudgeCalls, split evenly over a ladder's rungs, each at its own model's
// price), so that a ladder's range is given in money and not in calls only.
func (p *Plan) Price(table *price.Table, provider, defaultModel string, batchAPI bool) {
	total, most := price.Sum{}, price.Sum{}
	p.PriceTable, p.BatchAPI = table.Version(), batchAPI
	for i := range p.ACs {
		pa := &p.ACs[i]
		if pa.MaxJudgeCalls+pa.JudgeCalls+pa.RunnerCalls == 0 {
			pa.Cost, pa.MaxCost = nil, nil
			continue
		}
		models := pa.Judges
		if len(models) == 0 {
			models = []string{defaultModel}
		}
		rungs := pa.Ladder
		if len(rungs) == 0 {
			rungs = models
		}
		least := estimateCost(table, provider, defaultModel, batchAPI, pa, models, pa.JudgeCalls)
		worst := estimateCost(table, provider, defaultModel, batchAPI, pa, rungs, pa.MaxJudgeCalls)
		pa.Cost, pa.MaxCost = &least, &worst
		total.Add(least)
		most.Add(worst)
	}
	p.Cost, p.MaxCost = &total, &most
}

// estimateCost prices judgeCalls of pa split evenly over models (the first ones taking
// the remainder), and pa's runner calls at defaultModel, made directly.
func estimateCost(table *price.Table, provider, defaultModel string, batchAPI bool, pa *PlannedAC, models []string, judgeCalls int) price.Sum {
	var s price.Sum
	share := func(model string, calls int, answer int64, batch bool) {
		if calls == 0 {
			return
		}
		prompt, completion := int64(calls)*pa.perCall, int64(calls)*answer
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
	for k, m := range models {
		n := judgeCalls / len(models)
		if k < judgeCalls%len(models) {
			n++
		}
		share(m, n, EstimateAnswerTokens, batchAPI)
	}
	share(cmp.Or(pa.RunnerModel, defaultModel), pa.RunnerCalls, EstimateRunnerAnswerTokens, false)
	return s
}
