package collect

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
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
// Each of those is a sum over ACs (FlipsOf pairs a judge's calls on one AC, Panel
// compares judges on one AC), so each Add must hold every judgment of the ACs it holds,
// as a job's record does (one AC, all its calls): the figures are then FiguresOf's over
// all the judgments added, whatever the order of the Adds. The zero value is ready to
// use.
type FiguresFold struct {
	calls  int
	judges map[string]*judgeCounts
	pairs  map[[2]string]*agreement // judge names in sorted order
	alpha  stats.Coincidences
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
	for _, g := range trust.ByJudge(js) {
		c := f.judges[g.Judge]
		if c == nil {
			c = &judgeCounts{}
			f.judges[g.Judge] = c
		}
		b := trust.PositionBiasOf(g.Items, stats.Z95)
		fl := trust.FlipsOf(g.Items, stats.Z95)
		c.slotA += b.SlotA.K
		c.decided += b.SlotA.N
		c.pairs += fl.Pairs
		c.flips += fl.Rate.K
	}
	// The panel: each AC is a unit, each judge's outcome on it a value (none when
	// blocked), as trust.Panel lays out its matrix. Groups come sorted by judge.
	groups := trust.JudgeOutcomes(js)
	if len(groups) < 2 {
		return // no AC of these has two judges' values
	}
	units := map[string][]string{}
	var acs []string
	for r, g := range groups {
		for _, o := range g.Items {
			if o.Blocked {
				continue
			}
			u := units[o.AC]
			if u == nil {
				u = make([]string, len(groups))
				units[o.AC] = u
				acs = append(acs, o.AC)
			}
			u[r] = string(o.Winner)
		}
	}
	for _, ac := range acs {
		u := units[ac]
		f.alpha.Add(u)
		for r := range u {
			for s := r + 1; s < len(u); s++ {
				if u[r] == stats.Missing || u[s] == stats.Missing {
					continue
				}
				key := [2]string{groups[r].Judge, groups[s].Judge}
				p := f.pairs[key]
				if p == nil {
					p = &agreement{}
					f.pairs[key] = p
				}
				p.n++
				if u[r] == u[s] {
					p.k++
				}
			}
		}
	}
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
