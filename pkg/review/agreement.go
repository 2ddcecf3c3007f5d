package review

import (
	"fmt"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// Verdict is one verdict as agreement compares it, in its kind's terms (the kind turns
// the judge's and the person's answers into it: kind.Reviewing).
type Verdict struct {
	// Label is the verdict's outcome word: ab "ours", "reference" or "tie"; critic
	// "pass", "revise" or "reject"; equivalence one case's verdict ("equivalent",
	// "candidate-diverged", "candidate-regressed"); rubric "pass" or "fail".
	Label string `json:"label"`
	// Lenience orders labels by how favourable they are to what is judged (ab: ours 2,
	// tie 1, reference 0): a judge whose label is more lenient than the person's is too
	// lenient there.
	Lenience int `json:"lenience"`
	// Slot is the blind slot the label picked (ab: "A", "B", "" for a tie), for the
	// position bias a person's answers expose.
	Slot string `json:"slot,omitempty"`
	// Scores are the verdict's scores by dimension, in whole steps of the kind's scale
	// (critic 0-10; rubric 0, 1, 2 for 0, 0.5, 1), compared per dimension.
	Scores map[string]int `json:"scores,omitempty"`
}

// Scale is a kind's score scale: whole steps from Lo to Hi, each worth Unit of the
// kind's own score (rubric: 0..2 in steps of 0.5).
type Scale struct {
	Lo, Hi int
	Unit   float64
}

// Pair is one reviewed AC (one case of it, for a kind reviewed per case): what the judge
// said, what the person said.
type Pair struct {
	AC     string  `json:"ac_id"`
	Case   string  `json:"case,omitempty"`
	Kind   string  `json:"kind"`
	Model  string  `json:"model"`
	By     string  `json:"by"`
	Judge  Verdict `json:"judge"`
	Person Verdict `json:"person"`
	// Scale is the scale of the verdicts' scores (zero when they have none).
	Scale Scale `json:"-"`
}

// Disagreement is a reviewed AC whose judge and person labels differ.
type Disagreement struct {
	AC     string `json:"ac_id"`
	Case   string `json:"case,omitempty"`
	By     string `json:"by"`
	Judge  string `json:"judge"`
	Person string `json:"person"`
	// Lean is "lenient" or "strict" (the judge's label against the person's), "" when
	// the labels are equally favourable.
	Lean string `json:"lean,omitempty"`
}

// ScoreAgreement is the agreement on one score dimension.
type ScoreAgreement struct {
	Dimension string `json:"dimension"`
	N         int    `json:"n"`
	// Exact is the share of ACs scored alike.
	Exact stats.Proportion `json:"exact"`
	// Kappa is quadratic weighted kappa over the scale's steps.
	Kappa stats.Kappa `json:"weighted_kappa"`
	// MeanAbsDiff is the mean absolute difference in the kind's own units.
	MeanAbsDiff stats.Interval `json:"mean_abs_diff"`
	// Higher counts the ACs the judge scored above the person (too lenient where a
	// higher score is better), Lower below.
	Higher int `json:"judge_higher"`
	Lower  int `json:"judge_lower"`
}

// Agreement is a judge model's agreement with people on one kind.
type Agreement struct {
	Kind  string `json:"kind"`
	Model string `json:"model"`
	N     int    `json:"n"`
	// Share is the share of reviewed ACs whose labels agree, with its Wilson interval.
	Share stats.Proportion `json:"share"`
	// Kappa is Cohen's kappa of the labels, with its interval.
	Kappa stats.Kappa `json:"kappa"`
	// Lenient counts the ACs where the judge's label is more favourable than the
	// person's, Strict less.
	Lenient int `json:"too_lenient"`
	Strict  int `json:"too_strict"`
	// JudgeSlotA counts the ACs where the judge picked slot A and the person did not;
	// PersonSlotA the reverse. A judge with far more of the first favours slot A.
	JudgeSlotA  int `json:"judge_slot_a"`
	PersonSlotA int `json:"person_slot_a"`
	// Scores is the agreement per score dimension, by name.
	Scores        []ScoreAgreement `json:"scores,omitempty"`
	Disagreements []Disagreement   `json:"disagreements,omitempty"`
}

// Agree measures agreement per kind and judge model over reviewed pairs, in the order
// kinds and models first appear. Intervals are at 95 %; the score dimensions' bootstrap
// intervals are seeded with seed.
func Agree(pairs []Pair, seed uint64) ([]Agreement, error) {
	type key struct{ kind, model string }
	var order []key
	groups := map[key][]Pair{}
	for _, p := range pairs {
		k := key{p.Kind, p.Model}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	var out []Agreement
	for _, k := range order {
		a, err := agree(groups[k], seed)
		if err != nil {
			return nil, fmt.Errorf("agreement of %s on %s: %w", k.model, k.kind, err)
		}
		a.Kind, a.Model = k.kind, k.model
		out = append(out, a)
	}
	return out, nil
}

func agree(ps []Pair, seed uint64) (Agreement, error) {
	a := Agreement{N: len(ps)}
	var jl, pl []string
	same := 0
	dims := map[string]bool{}
	for _, p := range ps {
		jl, pl = append(jl, p.Judge.Label), append(pl, p.Person.Label)
		if p.Judge.Label == p.Person.Label {
			same++
		} else {
			d := Disagreement{AC: p.AC, Case: p.Case, By: p.By, Judge: p.Judge.Label, Person: p.Person.Label}
			switch {
			case p.Judge.Lenience > p.Person.Lenience:
				d.Lean = "lenient"
			case p.Judge.Lenience < p.Person.Lenience:
				d.Lean = "strict"
			}
			a.Disagreements = append(a.Disagreements, d)
		}
		switch {
		case p.Judge.Lenience > p.Person.Lenience:
			a.Lenient++
		case p.Judge.Lenience < p.Person.Lenience:
			a.Strict++
		}
		if p.Judge.Slot == "A" && p.Person.Slot != "A" {
			a.JudgeSlotA++
		}
		if p.Person.Slot == "A" && p.Judge.Slot != "A" {
			a.PersonSlotA++
		}
		for d := range p.Judge.Scores {
			if _, ok := p.Person.Scores[d]; ok {
				dims[d] = true
			}
		}
	}
	a.Share = stats.Wilson95(same, len(ps))
	k, err := stats.CohenKappa(jl, pl, stats.Z95)
	if err != nil {
		return a, err
	}
	a.Kappa = k
	names := make([]string, 0, len(dims))
	for d := range dims {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		s, err := scoreAgreement(ps, d, seed)
		if err != nil {
			return a, fmt.Errorf("dimension %s: %w", d, err)
		}
		a.Scores = append(a.Scores, s)
	}
	return a, nil
}

func scoreAgreement(ps []Pair, dim string, seed uint64) (ScoreAgreement, error) {
	out := ScoreAgreement{Dimension: dim}
	var js, xs []int
	var jf, xf []float64
	scale := Scale{}
	same := 0
	for _, p := range ps {
		j, ok1 := p.Judge.Scores[dim]
		x, ok2 := p.Person.Scores[dim]
		if !ok1 || !ok2 {
			continue
		}
		scale = p.Scale
		js, xs = append(js, j), append(xs, x)
		unit := p.Scale.Unit
		if unit == 0 {
			unit = 1
		}
		jf, xf = append(jf, float64(j)*unit), append(xf, float64(x)*unit)
		switch {
		case j == x:
			same++
		case j > x:
			out.Higher++
		default:
			out.Lower++
		}
	}
	out.N = len(js)
	out.Exact = stats.Wilson95(same, len(js))
	o := stats.BootstrapOptions{Seed: seed, Resamples: 1000}
	if scale.Hi > scale.Lo {
		k, err := stats.WeightedKappa(js, xs, scale.Lo, scale.Hi, o)
		if err != nil {
			return out, err
		}
		out.Kappa = k
	}
	mad, err := stats.MeanAbsDiff(jf, xf, o)
	if err != nil {
		return out, err
	}
	out.MeanAbsDiff = mad
	return out, nil
}
