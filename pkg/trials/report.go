package trials

import (
	"maps"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// Stability is how stable one judge's verdicts were over repeated trials.
type Stability struct {
	// Judge names the judges that decided ("provider/model", a panel's joined by ",").
	Judge string `json:"judge"`
	// Stable is the share of the judge's ACs judged with trials whose trials all gave
	// the reduced answer, with its Wilson interval.
	Stable stats.Proportion `json:"stable"`
	// MeanAgreement is the mean over those ACs of the share of trials agreeing with the
	// reduced answer.
	MeanAgreement float64 `json:"mean_agreement"`
}

// StabilityOf is each judge's stability over the final jobs that were judged with
// trials, at z (stats.Z95 for 95 % intervals), in judge order.
func StabilityOf(jobs []*records.Job, z float64) []Stability {
	type acc struct {
		stable, n int
		agree     []float64
	}
	by := map[string]*acc{}
	for _, j := range jobs {
		d := j.Decided
		if d == nil || d.Trials == nil || len(d.Trials.Answers) < 2 {
			continue
		}
		name := strings.Join(d.Judges, ",")
		a := by[name]
		if a == nil {
			a = &acc{}
			by[name] = a
		}
		a.n++
		if AllAgree(d.Trials) {
			a.stable++
		}
		a.agree = append(a.agree, d.Trials.Agreement)
	}
	var out []Stability
	for _, name := range slices.Sorted(maps.Keys(by)) {
		a := by[name]
		slices.Sort(a.agree)
		var sum float64
		for _, x := range a.agree {
			sum += x
		}
		out = append(out, Stability{Judge: name, Stable: stats.Wilson(a.stable, a.n, z), MeanAgreement: sum / float64(a.n)})
	}
	return out
}

// RungShare is the share of a ladder's ACs one rung decided.
type RungShare struct {
	Rung    int              `json:"rung"`
	Model   string           `json:"model"`
	Decided stats.Proportion `json:"decided"`
	// Calls are the calls the rung's model made for the ladder's ACs.
	Calls int `json:"calls"`
}

// LadderReport is what a batch's judge ladder did: how much each rung decided, whether
// the rungs agreed where both answered, and what it cost against asking the strongest
// rung for everything.
type LadderReport struct {
	Rungs []string `json:"rungs"`
	ACs   int      `json:"acs"`
	// Coverage is the share of the ladder's ACs decided per rung.
	Coverage []RungShare `json:"coverage"`
	// Agreement is, over the ACs the first and a later rung both answered, the share where
	// the later rung gave the first one's answer.
	Agreement stats.Proportion `json:"agreement"`
	// Cost is what the ladder's calls cost; StrongForAll what asking the last rung for
	// every AC would have cost (Counterfactual says how it is estimated), and Saving the
	// difference. StrongForAll is nil when the last rung has no price.
	Cost           price.Sum    `json:"cost"`
	StrongForAll   *price.Sum   `json:"strong_for_all,omitempty"`
	Saving         *price.Money `json:"saving_nano_usd,omitempty"`
	Counterfactual string       `json:"counterfactual"`
}

// CounterfactualMethod says how LadderReport.StrongForAll is estimated.
const CounterfactualMethod = "the last rung's recorded cost where it was asked; elsewhere the last rung's price times the tokens of the first rung's calls (the same prompt; the answer taken as long as the first rung's)"

// LadderOf is the report of the ladder jobs among jobs, nil when none had a ladder.
// lookup prices a provider's model (price.Table.Lookup); z sets the intervals.
func LadderOf(jobs []*records.Job, lookup func(provider, model string) (price.Price, bool), z float64) *LadderReport {
	var r *LadderReport
	decided := map[int]int{}
	calls := map[int]int{}
	both, agree := 0, 0
	strong := price.Sum{}
	strongPriced := true
	for _, j := range jobs {
		d := j.Decided
		if d == nil || d.Ladder == nil {
			continue
		}
		l := d.Ladder
		if r == nil {
			r = &LadderReport{Rungs: slices.Clone(l.Rungs), Counterfactual: CounterfactualMethod}
		}
		r.ACs++
		decided[l.Decided]++
		if l.Decided > 0 && len(l.Answers) > l.Decided && l.Answers[0] != "" && l.Answers[l.Decided] != "" {
			both++
			if l.Answers[0] == l.Answers[l.Decided] {
				agree++
			}
		}
		last := len(l.Rungs) - 1
		askedLast := false
		var first []records.Call
		for _, c := range j.Calls {
			r.Cost.Add(c.Cost())
			rung := rungOf(c.Judge, l.Rungs)
			if rung >= 0 {
				calls[rung]++
			}
			switch rung {
			case last:
				askedLast = true
				strong.Add(c.Cost())
			case 0:
				first = append(first, c)
			}
		}
		if askedLast {
			continue
		}
		for _, c := range first {
			provider, _, _ := strings.Cut(c.Judge, "/")
			p, ok := lookup(provider, l.Rungs[last])
			if !ok {
				strongPriced = false
				continue
			}
			if c.Cached || c.BudgetRefused != "" {
				continue
			}
			u := price.Usage{PromptTokens: c.PromptTokens, CachedPromptTokens: c.CachedPromptTokens, CompletionTokens: c.CompletionTokens, Batch: c.Batch}
			strong.Add(price.Sum{Cost: p.Cost(u), Priced: 1, PromptTokens: int64(u.PromptTokens), CachedPromptTokens: int64(u.CachedPromptTokens), CompletionTokens: int64(u.CompletionTokens)})
		}
	}
	if r == nil {
		return nil
	}
	for i, m := range r.Rungs {
		r.Coverage = append(r.Coverage, RungShare{Rung: i, Model: m, Decided: stats.Wilson(decided[i], r.ACs, z), Calls: calls[i]})
	}
	r.Agreement = stats.Wilson(agree, both, z)
	if strongPriced && strong.Unpriced == 0 {
		r.StrongForAll = &strong
		saving := strong.Cost - r.Cost.Cost
		r.Saving = &saving
	}
	return r
}

// rungOf is the rung whose model made a call judged by judge ("provider/model"), -1 for
// none.
func rungOf(judge string, rungs []string) int {
	_, model, _ := strings.Cut(judge, "/")
	for i, m := range rungs {
		if m == model {
			return i
		}
	}
	return -1
}
