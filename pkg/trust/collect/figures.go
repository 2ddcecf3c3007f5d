package collect

import (
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
// panel per judge, and the panel's alpha.
func FiguresOf(js []trust.Judgment) (Figures, error) {
	f := Figures{Flips: map[string]FlipCount{}}
	agreed, compared := map[string]int{}, map[string]int{}
	groups := trust.ByJudge(js)
	if len(groups) > 1 {
		p, err := trust.Panel(js, stats.Z95)
		if err != nil {
			return Figures{}, err
		}
		if p.Alpha != nil {
			a := p.Alpha.Alpha
			f.Alpha = &a
		}
		for _, pr := range p.Pairs {
			for _, j := range []string{pr.A, pr.B} {
				agreed[j] += pr.K
				compared[j] += pr.N
			}
		}
	}
	for _, g := range groups {
		b := trust.PositionBiasOf(g.Items, stats.Z95)
		fl := trust.FlipsOf(g.Items, stats.Z95)
		provider, model, _ := strings.Cut(g.Judge, "/")
		f.Judges = append(f.Judges, telemetry.JudgeFigures{Provider: provider, Model: model,
			SlotA: b.SlotA.K, Decided: b.SlotA.N, Flips: fl.Rate.K, Pairs: fl.Pairs,
			Agreed: agreed[g.Judge], Compared: compared[g.Judge]})
		f.Flips[g.Judge] = FlipCount{Pairs: fl.Pairs, Flips: fl.Rate.K}
	}
	return f, nil
}
