package stats

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Kappa is Cohen's kappa of two raters over the same items, with its interval and the
// parts it is made of. Defined is false when chance agreement is 1 (both raters gave one
// and the same label to every item): kappa is 0/0 there, and a report says so rather than
// printing a number.
type Kappa struct {
	N        int     `json:"n"`
	Observed float64 `json:"observed"`
	Chance   float64 `json:"chance"`
	Defined  bool    `json:"defined"`
	Interval
}

// CohenKappa is Cohen's (1960) kappa of two raters' nominal labels, a[i] and b[i] being
// the two labels of item i, with the large-sample interval at z:
//
//	po = share of items labelled alike, pe = Σ_c pa(c)·pb(c)
//	κ  = (po - pe) / (1 - pe)
//	se = sqrt(po(1-po) / (n (1-pe)²))
//
// The interval is clipped to [-1, 1]. The simple standard error rather than Fleiss,
// Cohen and Everitt's (1969) exact one: it needs only po and pe, is what most tools
// print, and for the sample sizes a review queue holds (tens to hundreds) the two differ
// in the third decimal.
func CohenKappa(a, b []string, z float64) (Kappa, error) {
	if len(a) != len(b) {
		return Kappa{}, fmt.Errorf("stats: kappa over %d and %d labels: want one pair per item", len(a), len(b))
	}
	if len(a) == 0 {
		return Kappa{}, fmt.Errorf("stats: kappa over no items")
	}
	n := float64(len(a))
	ca, cb := map[string]float64{}, map[string]float64{}
	agree := 0.0
	for i := range a {
		ca[a[i]]++
		cb[b[i]]++
		if a[i] == b[i] {
			agree++
		}
	}
	po := agree / n
	pe := 0.0
	// Summed in the labels' order: a map's order would make pe, and so kappa, differ in
	// their last bits from run to run.
	for _, c := range slices.Sorted(maps.Keys(ca)) {
		pe += ca[c] / n * cb[c] / n
	}
	out := Kappa{N: len(a), Observed: po, Chance: pe}
	if pe >= 1 {
		return out, nil
	}
	k := (po - pe) / (1 - pe)
	se := math.Sqrt(po * (1 - po) / (n * (1 - pe) * (1 - pe)))
	out.Defined = true
	out.Interval = Interval{Point: k, Lo: math.Max(-1, k-z*se), Hi: math.Min(1, k+z*se)}
	return out, nil
}

// WeightedKappa is Cohen's (1968) weighted kappa with quadratic weights of two raters'
// ordinal scores over the same items (a critic's 0-10 scores): disagreeing by 1 costs
// far less than disagreeing by 10. Its interval is the seeded percentile bootstrap over
// items (o), as no simple closed form holds for it. Scores outside [lo, hi] are an
// error.
//
//	w(i,j) = (i-j)² / (hi-lo)²
//	κw = 1 - Σ w·observed / Σ w·expected
func WeightedKappa(a, b []int, lo, hi int, o BootstrapOptions) (Kappa, error) {
	if len(a) != len(b) {
		return Kappa{}, fmt.Errorf("stats: weighted kappa over %d and %d scores: want one pair per item", len(a), len(b))
	}
	if len(a) == 0 {
		return Kappa{}, fmt.Errorf("stats: weighted kappa over no items")
	}
	if hi <= lo {
		return Kappa{}, fmt.Errorf("stats: weighted kappa scale [%d, %d]: want lo < hi", lo, hi)
	}
	for i := range a {
		if a[i] < lo || a[i] > hi || b[i] < lo || b[i] > hi {
			return Kappa{}, fmt.Errorf("stats: weighted kappa: item %d scored %d and %d, outside [%d, %d]", i, a[i], b[i], lo, hi)
		}
	}
	type pair struct{ a, b int }
	items := make([]pair, len(a))
	for i := range a {
		items[i] = pair{a[i], b[i]}
	}
	span := float64((hi - lo) * (hi - lo))
	stat := func(ps []pair) (float64, bool) {
		n := float64(len(ps))
		// The margins by score, summed in the scale's order: a map's order would make
		// the sums, and so the interval, differ in their last bits from run to run.
		ma, mb := make([]float64, hi-lo+1), make([]float64, hi-lo+1)
		obs := 0.0
		for _, p := range ps {
			ma[p.a-lo]++
			mb[p.b-lo]++
			d := float64(p.a - p.b)
			obs += d * d / span
		}
		exp := 0.0
		for i, ki := range ma {
			for j, kj := range mb {
				d := float64(i - j)
				exp += d * d / span * ki * kj / n
			}
		}
		if exp == 0 {
			return 0, false
		}
		return 1 - obs/exp, true
	}
	point, ok := stat(items)
	out := Kappa{N: len(a)}
	if !ok {
		return out, nil
	}
	iv, err := Bootstrap(items, func(ps []pair) float64 {
		v, ok := stat(ps)
		if !ok {
			// A resample where one rater gave a single score throughout: as far as the
			// sample shows, agreement no better than chance.
			return 0
		}
		return v
	}, o)
	if err != nil {
		return Kappa{}, err
	}
	out.Defined, out.Interval = true, Interval{Point: point, Lo: iv.Lo, Hi: iv.Hi}
	return out, nil
}

// MeanAbsDiff is the mean absolute difference of paired scores, with the seeded
// percentile bootstrap interval over items (o): how far, on the scores' own scale, one
// rater is from the other on average.
func MeanAbsDiff(a, b []float64, o BootstrapOptions) (Interval, error) {
	if len(a) != len(b) {
		return Interval{}, fmt.Errorf("stats: mean absolute difference over %d and %d scores: want one pair per item", len(a), len(b))
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = math.Abs(a[i] - b[i])
	}
	return Bootstrap(d, meanOf, o)
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Labels lists the distinct labels of a and b, sorted: the rows of a confusion table.
func Labels(a, b []string) []string {
	var out []string
	for _, s := range append(slices.Clone(a), b...) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
