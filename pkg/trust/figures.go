package trust

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// OutcomeRates are the shares of a batch's ACs per outcome, each with its Wilson
// interval, and the batch's score with a bootstrap interval.
type OutcomeRates struct {
	ACs       int              `json:"acs"`
	Ours      stats.Proportion `json:"ours"`
	Reference stats.Proportion `json:"reference"`
	Tie       stats.Proportion `json:"tie"`
	Blocked   stats.Proportion `json:"blocked"`
	// Score is the mean over the ACs that were not blocked of 1 for ours, 0.5 for a tie and
	// 0 for the reference (the win rate with ties split, as Arena-Hard and AlpacaEval
	// count them), with a seeded percentile-bootstrap interval over those ACs. Scored
	// counts them; with none Score is zero.
	Score  stats.Interval `json:"score"`
	Scored int            `json:"scored"`
}

// Rates computes the outcome rates of one AC outcome per AC. z sets the Wilson
// intervals; boot sets the score's bootstrap (its Seed makes the report reproducible).
func Rates(outcomes []Outcome, z float64, boot stats.BootstrapOptions) (OutcomeRates, error) {
	n := len(outcomes)
	var ours, ref, tie, blocked int
	var scores []float64
	for _, o := range outcomes {
		switch {
		case o.Blocked:
			blocked++
			continue
		case o.Winner == WinnerOurs:
			ours++
			scores = append(scores, 1)
		case o.Winner == WinnerReference:
			ref++
			scores = append(scores, 0)
		case o.Winner == WinnerTie:
			tie++
			scores = append(scores, 0.5)
		default:
			return OutcomeRates{}, fmt.Errorf("trust: outcome of %s: winner %q, want ours, reference or tie", o.AC, o.Winner)
		}
	}
	r := OutcomeRates{
		ACs: n, Ours: stats.Wilson(ours, n, z), Reference: stats.Wilson(ref, n, z),
		Tie: stats.Wilson(tie, n, z), Blocked: stats.Wilson(blocked, n, z), Scored: len(scores),
	}
	if len(scores) > 0 {
		score, err := stats.Bootstrap(scores, mean, boot)
		if err != nil {
			return OutcomeRates{}, fmt.Errorf("trust: score interval: %w", err)
		}
		r.Score = score
	}
	return r, nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// PositionBias is how often the judge picked the first slot it was shown.
type PositionBias struct {
	// Calls counts the judgments; Ties and Unanswered the ones that picked no slot.
	Calls      int `json:"calls"`
	Ties       int `json:"ties"`
	Unanswered int `json:"unanswered"`
	// SlotA is the share of slot-A picks among decided answers (A or B). An unbiased
	// judge on a shuffled batch gives 0.5: the gater puts ours in slot A for about half
	// of the ACs, and a swapped call shows each artifact in both slots.
	SlotA stats.Proportion `json:"slot_a"`
	// Biased means SlotA's interval excludes 0.5.
	Biased bool `json:"biased"`
}

// PositionBiasOf measures slot-A preference over judgments, in slot terms as each call saw
// them (a swapped call's "A" is the artifact that call showed first).
func PositionBiasOf(js []Judgment, z float64) PositionBias {
	var b PositionBias
	a, decided := 0, 0
	for _, j := range js {
		b.Calls++
		switch j.Slot() {
		case SlotA:
			a++
			decided++
		case SlotB:
			decided++
		case SlotTie:
			b.Ties++
		default:
			b.Unanswered++
		}
	}
	b.SlotA = stats.Wilson(a, decided, z)
	b.Biased = decided > 0 && b.SlotA.Excludes(0.5)
	return b
}

// Flips summarises swapped ACs: the same pair judged in both orders.
type Flips struct {
	// Pairs counts (judge, AC) pairs with an answered call in each order; Unpaired the
	// swapped ones where one of the two calls has no answer.
	Pairs    int `json:"pairs"`
	Unpaired int `json:"unpaired"`
	// Rate is the share of pairs whose two answers disagree once un-swapped.
	Rate stats.Proportion `json:"rate"`
	// Patterns counts every pair by "<first>-><second>", both answers written in the
	// first call's slot letters (the second call's A is the first call's B). "A->A" and
	// "B->B" are consistent; "A->B" means the judge picked whatever it saw first both
	// times, "B->A" whatever it saw second; "A->tie", "tie->B", ... mean one order
	// showed a difference the other did not.
	Patterns map[string]int `json:"patterns"`
	// Flipped lists the ACs that flipped (with the judge when pairs of several judges were
	// passed, "judge: AC"), sorted.
	Flipped []string `json:"flipped,omitempty"`
}

// FlipsOf pairs the first (AB) and swapped (BA) call of each judge on each AC. ACs judged
// in one order only are not counted.
func FlipsOf(js []Judgment, z float64) Flips {
	type key struct{ judge, ac string }
	type pair struct{ first, second *Judgment }
	pairs := map[key]*pair{}
	var keys []key
	judges := map[string]bool{}
	for i := range js {
		j := &js[i]
		k := key{j.Judge, j.AC}
		p, ok := pairs[k]
		if !ok {
			p = &pair{}
			pairs[k] = p
			keys = append(keys, k)
		}
		judges[j.Judge] = true
		if j.swapped() {
			p.second = j
		} else {
			p.first = j
		}
	}
	f := Flips{Patterns: map[string]int{}}
	flips := 0
	for _, k := range keys {
		p := pairs[k]
		if p.second == nil || p.first == nil {
			if p.second != nil {
				f.Unpaired++
			}
			continue
		}
		first, second := p.first.Slot(), unswap(p.second.Slot())
		if first == "" || second == "" {
			f.Unpaired++
			continue
		}
		f.Pairs++
		f.Patterns[first+"->"+second]++
		if first != second {
			flips++
			name := k.ac
			if len(judges) > 1 {
				name = k.judge + ": " + k.ac
			}
			f.Flipped = append(f.Flipped, name)
		}
	}
	slices.Sort(f.Flipped)
	f.Rate = stats.Wilson(flips, f.Pairs, z)
	return f
}

// unswap writes a swapped call's raw answer in the first call's slot letters.
func unswap(raw string) string {
	switch raw {
	case SlotA:
		return SlotB
	case SlotB:
		return SlotA
	}
	return raw
}

// LengthOptions set the length-sensitivity rule. Zero values take the defaults.
type LengthOptions struct {
	// MinRatio is how much longer (longer/shorter) one side must be for the pair to count
	// as having a longer side; default 1.1.
	MinRatio float64
	// FlagRate is the longer side's win rate at or above which, with the other two
	// conditions, the judge is flagged; default 0.65.
	FlagRate float64
}

// Length verdicts.
const (
	LengthOK         = "ok"
	LengthFlagged    = "flagged"
	LengthConfounded = "confounded"
	LengthNoData     = "no data"
)

// LengthBin is the longer side's win rate among pairs whose length ratio falls in
// [MinRatio, MaxRatio); MaxRatio 0 means no upper bound.
type LengthBin struct {
	Label    string  `json:"label"`
	MinRatio float64 `json:"min_ratio"`
	MaxRatio float64 `json:"max_ratio,omitempty"`
	// LongerWins is over the decided answers (ours or reference) in the bin; Ties counts
	// the tie answers, which pick no side and are left out.
	LongerWins stats.Proportion `json:"longer_wins"`
	Ties       int              `json:"ties"`
}

// LengthSensitivity is how the judge's picks follow the length of the two artifacts.
type LengthSensitivity struct {
	Bins []LengthBin `json:"bins"`
	// Longer is the longer side's win rate over every decided answer whose ratio is at
	// least MinRatio; OursLonger and RefLonger split it by which role was longer.
	Longer     stats.Proportion `json:"longer"`
	OursLonger stats.Proportion `json:"ours_longer"`
	RefLonger  stats.Proportion `json:"ref_longer"`
	// Verdict is LengthOK, LengthFlagged, LengthConfounded or LengthNoData; Reason says
	// why in a sentence.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// lengthBins are the ratio bins, from about equal to more than twice as long.
var lengthBins = []LengthBin{
	{Label: "within 10%", MinRatio: 1, MaxRatio: 1.1},
	{Label: "1.1-1.5x", MinRatio: 1.1, MaxRatio: 1.5},
	{Label: "1.5-2x", MinRatio: 1.5, MaxRatio: 2},
	{Label: "2x or more", MinRatio: 2},
}

// LengthOf measures length sensitivity over judgments with both lengths known and
// different. The rule (docs/judging.md):
//
//   - only decided answers (ours or reference) whose longer side is at least MinRatio
//     times the shorter count;
//   - flagged when the longer side wins at least FlagRate of them, its Wilson interval
//     excludes 0.5, and the longer side also wins more than half within each of the two
//     strata (ours longer, reference longer). The strata are the control for content: a
//     build that is really better wins when it is longer and when it is shorter, so its
//     longer-side rate is high in one stratum and low in the other, whereas a judge that
//     rewards length wins for the longer side in both;
//   - confounded, never flagged, when one stratum is empty: one role was always longer,
//     so length and content cannot be told apart from this batch.
func LengthOf(js []Judgment, z float64, o LengthOptions) LengthSensitivity {
	if o.MinRatio == 0 {
		o.MinRatio = 1.1
	}
	if o.FlagRate == 0 {
		o.FlagRate = 0.65
	}
	bins := slices.Clone(lengthBins)
	binK := make([]int, len(bins))
	binN := make([]int, len(bins))
	var longerK, longerN, oursK, oursN, refK, refN int
	for _, j := range js {
		w := j.Answer()
		if w == "" || j.LenOurs <= 0 || j.LenRef <= 0 || j.LenOurs == j.LenRef {
			continue
		}
		oursLonger := j.LenOurs > j.LenRef
		ratio := float64(max(j.LenOurs, j.LenRef)) / float64(min(j.LenOurs, j.LenRef))
		b := len(bins) - 1
		for i, bin := range bins {
			if bin.MaxRatio == 0 || ratio < bin.MaxRatio {
				b = i
				break
			}
		}
		if w == WinnerTie {
			bins[b].Ties++
			continue
		}
		won := (w == WinnerOurs) == oursLonger
		binN[b]++
		if won {
			binK[b]++
		}
		if ratio < o.MinRatio {
			continue
		}
		longerN++
		if won {
			longerK++
		}
		if oursLonger {
			oursN++
			if won {
				oursK++
			}
		} else {
			refN++
			if won {
				refK++
			}
		}
	}
	for i := range bins {
		bins[i].LongerWins = stats.Wilson(binK[i], binN[i], z)
	}
	l := LengthSensitivity{
		Bins: bins, Longer: stats.Wilson(longerK, longerN, z),
		OursLonger: stats.Wilson(oursK, oursN, z), RefLonger: stats.Wilson(refK, refN, z),
	}
	switch {
	case longerN == 0:
		l.Verdict, l.Reason = LengthNoData, fmt.Sprintf("no decided answer on a pair whose longer side is at least %.2gx the shorter", o.MinRatio)
	case oursN == 0 || refN == 0:
		side := "ours"
		if oursN == 0 {
			side = "the reference"
		}
		l.Verdict = LengthConfounded
		l.Reason = fmt.Sprintf("%s was the longer side in every pair: length and content cannot be told apart (longer side won %d of %d)", side, longerK, longerN)
	case l.Longer.Point >= o.FlagRate && l.Longer.Excludes(0.5) && 2*oursK > oursN && 2*refK > refN:
		l.Verdict = LengthFlagged
		l.Reason = fmt.Sprintf("the longer side won %s, and won more than half whichever role was longer (ours longer %d/%d, reference longer %d/%d)",
			l.Longer, oursK, oursN, refK, refN)
	default:
		l.Verdict = LengthOK
		l.Reason = fmt.Sprintf("the longer side won %s (flagged at %.2f or more, with the interval above 0.5 and a majority whichever role was longer)", l.Longer, o.FlagRate)
	}
	return l
}

// PanelAgreement is how far the judges of a panel agree on the ACs they all judged.
type PanelAgreement struct {
	Judges []string `json:"judges"`
	// Alpha is Krippendorff's alpha (nominal) over each judge's outcome per AC (ours,
	// reference, tie; blocked counts as missing). AlphaNote says why it is undefined
	// when it is (nil Alpha).
	Alpha     *stats.Alpha `json:"alpha,omitempty"`
	AlphaNote string       `json:"alpha_note,omitempty"`
	// Pairs is the percent agreement of every pair of judges.
	Pairs []JudgePair `json:"pairs"`
	// Split lists the ACs where the judges who answered did not all agree.
	Split []SplitAC `json:"split,omitempty"`
}

// JudgePair is the agreement of two judges over the ACs both answered.
type JudgePair struct {
	A string `json:"a"`
	B string `json:"b"`
	stats.Proportion
}

// SplitAC is an AC the panel split on, with each judge's outcome ("blocked" for none).
type SplitAC struct {
	AC      string            `json:"ac"`
	Answers map[string]string `json:"answers"`
}

// Panel computes panel agreement from the judgments of several judges. Each judge's
// outcome per AC is JudgeOutcomes' (a judge whose swap pair flipped counts as tie).
func Panel(js []Judgment, z float64) (PanelAgreement, error) {
	groups := JudgeOutcomes(js)
	var acs []string
	for _, g := range groups {
		for _, o := range g.Items {
			acs = append(acs, o.AC)
		}
	}
	slices.Sort(acs)
	acs = slices.Compact(acs)
	col := map[string]int{}
	for i, ac := range acs {
		col[ac] = i
	}
	p := PanelAgreement{}
	data := make([][]string, len(groups))
	for r, g := range groups {
		p.Judges = append(p.Judges, g.Judge)
		data[r] = make([]string, len(acs))
		for _, o := range g.Items {
			if !o.Blocked {
				data[r][col[o.AC]] = string(o.Winner)
			}
		}
	}
	a, err := stats.AlphaNominal(data)
	switch {
	case err == nil:
		p.Alpha = &a
	case errors.Is(err, stats.ErrNoPairs):
		p.AlphaNote = "undefined: no AC was answered by two judges"
	case errors.Is(err, stats.ErrNoVariation):
		p.AlphaNote = "undefined: every judge gave the same answer on every AC (perfect agreement, but nothing shows the judges can tell outcomes apart)"
	default:
		return PanelAgreement{}, fmt.Errorf("trust: panel alpha: %w", err)
	}
	pairs, err := stats.PairwiseAgreement(data, z)
	if err != nil {
		return PanelAgreement{}, fmt.Errorf("trust: panel agreement: %w", err)
	}
	for _, pa := range pairs {
		p.Pairs = append(p.Pairs, JudgePair{A: p.Judges[pa.I], B: p.Judges[pa.J], Proportion: pa.Proportion})
	}
	for u, ac := range acs {
		seen := map[string]bool{}
		for r := range data {
			if v := data[r][u]; v != stats.Missing {
				seen[v] = true
			}
		}
		if len(seen) < 2 {
			continue
		}
		s := SplitAC{AC: ac, Answers: map[string]string{}}
		for r, j := range p.Judges {
			s.Answers[j] = cmp.Or(data[r][u], "blocked")
		}
		p.Split = append(p.Split, s)
	}
	return p, nil
}

// SpotChecks is how often people agreed with a judge in HE-2 spot checks.
type SpotChecks struct {
	Checks int `json:"checks"`
	// Approved is the share of checks a person approved outright.
	Approved stats.Proportion `json:"approved"`
	// Dimensions gives, per rubric dimension, the share of checks that did not name that
	// dimension as wrong.
	Dimensions []DimensionAgreement `json:"dimensions"`
}

// DimensionAgreement is the agreement of people with the judge on one dimension.
type DimensionAgreement struct {
	Dimension string `json:"dimension"`
	stats.Proportion
}

// SpotCheckAgreement measures HE-2 agreement per dimension. A spot check either approves
// the sign-off or names the one dimension the judge got wrong, so a check counts as
// agreement on every dimension it does not name: an upper bound when a person would have
// named more than one. dimensions lists the rubric's dimensions in the order to report
// them; a dimension a check names that is not listed is added after them, sorted.
func SpotCheckAgreement(checks []SpotCheck, dimensions []string, z float64) SpotChecks {
	named := map[string]int{}
	approved := 0
	for _, c := range checks {
		if c.Approved {
			approved++
		} else if c.Dimension != "" {
			named[c.Dimension]++
		}
	}
	dims := slices.Clone(dimensions)
	var extra []string
	for d := range named {
		if !slices.Contains(dims, d) {
			extra = append(extra, d)
		}
	}
	slices.Sort(extra)
	dims = append(dims, extra...)
	n := len(checks)
	out := SpotChecks{Checks: n, Approved: stats.Wilson(approved, n, z)}
	for _, d := range dims {
		out.Dimensions = append(out.Dimensions, DimensionAgreement{Dimension: d, Proportion: stats.Wilson(n-named[d], n, z)})
	}
	return out
}

// Usage is what a judge's calls cost.
type Usage struct {
	// Calls counts every recorded answer; CacheHits the ones served from the judge-call
	// cache, ProviderCalls the rest (calls actually made), Failed the provider calls
	// without a valid answer.
	Calls         int `json:"calls"`
	ProviderCalls int `json:"provider_calls"`
	CacheHits     int `json:"cache_hits"`
	Failed        int `json:"failed"`
	// CacheHitRate is CacheHits / Calls (0 with no calls).
	CacheHitRate float64 `json:"cache_hit_rate"`
	// PromptTokens and CompletionTokens add up the provider calls only: a cache hit costs
	// nothing.
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// LatencyP50 and LatencyP95 (milliseconds, type-7 quantiles) are over the provider
	// calls, failed ones included (a timeout is latency the batch paid).
	LatencyP50 float64 `json:"latency_p50_ms"`
	LatencyP95 float64 `json:"latency_p95_ms"`
}

// UsageOf adds up calls.
func UsageOf(calls []Call) Usage {
	var u Usage
	var lat []float64
	for _, c := range calls {
		u.Calls++
		if c.Cached {
			u.CacheHits++
			continue
		}
		u.ProviderCalls++
		if c.Status != StatusOK {
			u.Failed++
		}
		u.PromptTokens += c.PromptTokens
		u.CompletionTokens += c.CompletionTokens
		lat = append(lat, float64(c.LatencyMillis))
	}
	if u.Calls > 0 {
		u.CacheHitRate = float64(u.CacheHits) / float64(u.Calls)
	}
	if len(lat) > 0 {
		u.LatencyP50 = stats.Quantile(lat, 0.5)
		u.LatencyP95 = stats.Quantile(lat, 0.95)
	}
	return u
}
