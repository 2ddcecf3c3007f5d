package collect

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/trials"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// Figures are what a completed batch's pairwise judgments tell about each judge model,
// for the metrics the aggregator exports and what a kind keeps of them for its later
// jobs (stage.Learning: ab's flip history, which `positions: auto` reads).
type Figures struct {
	// Judges holds each model's counts (telemetry.BatchJudged exports them).
	Judges []telemetry.JudgeFigures
	// Alpha is the panel's Krippendorff's alpha, nil without a panel or when undefined.
	Alpha *float64
	// Flips are each judge's swapped pairs and flips, by "provider/model".
	Flips map[string]FlipCount
}

// FlipCount is one judge's swapped pairs in a batch and how many of them flipped.
type FlipCount struct{ Pairs, Flips int }

// FiguresOf computes the figures of a batch's judgments (Judgments of its final pairwise
// jobs) with package trust: position bias, flips and agreement with the rest of the
// panel per judge, and the panel's alpha. It is one FiguresFold fed every judgment at
// once.
func FiguresOf(js []trust.Judgment) (Figures, error) {
	var f FiguresFold
	f.Add(js)
	return f.Figures()
}

// FiguresFold computes a batch's Figures from its jobs' judgments fed one job at a time,
// holding counts, never the judgments: per judge its slot-A picks and decided answers
// (trust.PositionBiasOf), its swapped pairs and flips (trust.FlipsOf); per pair of
// judges their agreements and comparisons, and the panel's coincidence counts for alpha
// (trust.Panel's, over each judge's outcome per AC, trust.JudgeOutcomes). Its memory
// grows with the judges, not the ACs: the aggregator folds a 1,000,000-AC batch's
// figures as it folds its completion.
//
// Each of those is a sum over ACs (FlipsOf pairs a judge's calls on one AC, whatever
// their trial; JudgeOutcomes reduces them; Panel compares judges on one AC), so each Add
// must hold every judgment of the ACs it holds, as a job's record does (one AC, all its
// calls): the figures are then FiguresOf's over all the judgments added, whatever the
// order of the Adds (the tests hold it to the whole-slice computation it replaced). The
// zero value is ready to use.
type FiguresFold struct {
	calls  int
	judges map[string]*judgeCounts
	pairs  map[[2]string]*agreement // judge names in sorted order
	alpha  stats.Coincidences
	// Scratch for one Add, kept so a job's Add allocates nothing once the judges are known.
	order []int
	unit  []string
	names []string
}

// judgeCounts are one judge's counts behind its telemetry.JudgeFigures.
type judgeCounts struct{ slotA, decided, pairs, flips int }

// agreement counts the ACs two judges both answered (n) and agreed on (k).
type agreement struct{ k, n int }

// Add counts the judgments of some ACs, every judgment of each (one job's).
func (f *FiguresFold) Add(js []trust.Judgment) {
	if len(js) == 0 {
		return
	}
	if f.judges == nil {
		f.judges, f.pairs = map[string]*judgeCounts{}, map[[2]string]*agreement{}
	}
	f.calls += len(js)
	// The calls by AC, then judge, each run in input order (a stable sort): one judge's
	// calls on one AC are what FlipsOf pairs and JudgeOutcomes reduces (the last of each
	// order pairs, trials in first-seen order), one AC's runs are a unit of Panel's.
	f.order = f.order[:0]
	for i := range js {
		f.order = append(f.order, i)
	}
	slices.SortStableFunc(f.order, func(a, b int) int {
		return cmp.Or(strings.Compare(js[a].AC, js[b].AC), strings.Compare(js[a].Judge, js[b].Judge))
	})
	for start := 0; start < len(f.order); {
		ac := js[f.order[start]].AC
		f.unit, f.names = f.unit[:0], f.names[:0]
		end := start
		for end < len(f.order) && js[f.order[end]].AC == ac {
			end++
		}
		for s := start; s < end; {
			judge := js[f.order[s]].Judge
			e := s
			for e < end && js[f.order[e]].Judge == judge {
				e++
			}
			f.unit = append(f.unit, f.judgeOnAC(js, judge, f.order[s:e]))
			f.names = append(f.names, judge)
			s = e
		}
		f.alpha.Add(f.unit)
		for r, a := range f.unit {
			for s := r + 1; s < len(f.unit); s++ {
				b := f.unit[s]
				if a == stats.Missing || b == stats.Missing {
					continue
				}
				key := [2]string{f.names[r], f.names[s]}
				p := f.pairs[key]
				if p == nil {
					p = &agreement{}
					f.pairs[key] = p
				}
				p.n++
				if a == b {
					p.k++
				}
			}
		}
		start = end
	}
}

// judgeOnAC counts one judge's calls on one AC (js[i] for i in calls, in input order)
// toward its position bias and flips, as PositionBiasOf and FlipsOf count them, and
// returns its outcome on the AC as JudgeOutcomes reduces it (stats.Missing when blocked).
func (f *FiguresFold) judgeOnAC(js []trust.Judgment, judge string, calls []int) string {
	c := f.judges[judge]
	if c == nil {
		c = &judgeCounts{}
		f.judges[judge] = c
	}
	type trialOutcome struct {
		trial   int
		winner  trust.Winner
		blocked bool
	}
	var held [2]trialOutcome
	outcomes := held[:0]
	var first, second *trust.Judgment
	for _, i := range calls {
		j := &js[i]
		switch j.Slot() {
		case trust.SlotA:
			c.slotA++
			c.decided++
		case trust.SlotB:
			c.decided++
		}
		if j.Order == trust.OrderSwapped {
			second = j
		} else {
			first = j
		}
		w := j.Answer()
		t := slices.IndexFunc(outcomes, func(o trialOutcome) bool { return o.trial == j.Trial })
		if t < 0 {
			t = len(outcomes)
			outcomes = append(outcomes, trialOutcome{trial: j.Trial, winner: w})
		}
		o := &outcomes[t]
		switch {
		case w == "":
			o.blocked, o.winner = true, ""
		case o.blocked:
		case o.winner != w:
			o.winner = trust.WinnerTie
		}
	}
	if first != nil && second != nil {
		a, b := first.Slot(), unswap(second.Slot())
		if a != "" && b != "" {
			c.pairs++
			if a != b {
				c.flips++
			}
		}
	}
	if len(outcomes) == 1 {
		if outcomes[0].blocked {
			return stats.Missing
		}
		return string(outcomes[0].winner)
	}
	answers := make([]string, 0, len(outcomes))
	for _, o := range outcomes {
		if o.blocked {
			return stats.Missing
		}
		answers = append(answers, string(o.winner))
	}
	if r := trials.Majority(answers, 0); r.Unsure == "" {
		return r.Answer
	}
	return string(trust.WinnerTie)
}

// unswap writes a swapped call's slot in the first call's slot letters, as FlipsOf does.
func unswap(slot string) string {
	switch slot {
	case trust.SlotA:
		return trust.SlotB
	case trust.SlotB:
		return trust.SlotA
	}
	return slot
}

// Calls counts the judgments added.
func (f *FiguresFold) Calls() int { return f.calls }

// Figures are the figures of the judgments added so far, judges sorted by name.
func (f *FiguresFold) Figures() (Figures, error) {
	out := Figures{Flips: map[string]FlipCount{}}
	agreed, compared := map[string]int{}, map[string]int{}
	for key, p := range f.pairs {
		for _, j := range key {
			agreed[j] += p.k
			compared[j] += p.n
		}
	}
	if len(f.judges) > 1 {
		a, err := f.alpha.Alpha()
		switch {
		case err == nil:
			out.Alpha = &a.Alpha
		case errors.Is(err, stats.ErrNoPairs), errors.Is(err, stats.ErrNoVariation):
		default:
			return Figures{}, err
		}
	}
	for _, judge := range slices.SortedFunc(maps.Keys(f.judges), cmp.Compare) {
		c := f.judges[judge]
		provider, model, _ := strings.Cut(judge, "/")
		out.Judges = append(out.Judges, telemetry.JudgeFigures{Provider: provider, Model: model,
			SlotA: c.slotA, Decided: c.decided, Flips: c.flips, Pairs: c.pairs,
			Agreed: agreed[judge], Compared: compared[judge]})
		out.Flips[judge] = FlipCount{Pairs: c.pairs, Flips: c.flips}
	}
	return out, nil
}
