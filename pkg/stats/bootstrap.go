package stats

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// BootstrapOptions configure Bootstrap.
type BootstrapOptions struct {
	// Resamples is the number of bootstrap resamples; zero means 1000.
	Resamples int
	// Level is the confidence level; zero means 0.95.
	Level float64
	// Seed makes the interval reproducible: the same items, statistic and seed always
	// give the same interval. A report records the seed it used.
	Seed uint64
}

// pcgStream is the second PCG seed word. It is fixed so that one number, Seed, names a
// resampling completely.
const pcgStream = 0x7472_6962_756e_616c // "tribunal" in ASCII

// Bootstrap returns the percentile bootstrap interval of stat over items, as Arena-Hard
// reports its win rates: draw Resamples samples of len(items) items with replacement,
// compute stat on each, and take the (1-Level)/2 and 1-(1-Level)/2 quantiles (type 7, see
// Quantile) of those values. Point is stat over the items themselves.
//
// Resample here means items, not judge calls: pass one item per unit that is independent
// of the others (an AC, not the two calls of a swapped AC), so the interval reflects the
// variation between ACs.
//
// The resampling is deterministic for a seed and stable across Go releases: indices come
// from math/rand/v2's PCG (whose output for a seed is fixed) through Lemire's
// multiply-shift, not from Rand.IntN, whose algorithm the standard library may change.
// testdata/reference.py reimplements it in Python and reproduces the intervals the tests
// pin. stat must not keep the slice it is given (it is reused).
func Bootstrap[T any](items []T, stat func([]T) float64, o BootstrapOptions) (Interval, error) {
	if len(items) == 0 {
		return Interval{}, fmt.Errorf("stats: bootstrap over no items")
	}
	if o.Resamples == 0 {
		o.Resamples = 1000
	}
	if o.Resamples < 1 {
		return Interval{}, fmt.Errorf("stats: bootstrap resamples %d: want at least 1", o.Resamples)
	}
	if o.Level == 0 {
		o.Level = 0.95
	}
	if !(o.Level > 0 && o.Level < 1) {
		return Interval{}, fmt.Errorf("stats: bootstrap level %v: want a number strictly between 0 and 1", o.Level)
	}
	src := rand.NewPCG(o.Seed, pcgStream)
	n := uint64(len(items))
	sample := make([]T, len(items))
	values := make([]float64, o.Resamples)
	for r := range values {
		for i := range sample {
			idx, _ := bits.Mul64(src.Uint64(), n)
			sample[i] = items[idx]
		}
		values[r] = stat(sample)
	}
	point := stat(items)
	for _, v := range values {
		if math.IsNaN(v) {
			return Interval{}, fmt.Errorf("stats: bootstrap statistic returned NaN on a resample")
		}
	}
	slices.Sort(values)
	tail := (1 - o.Level) / 2
	return Interval{Point: point, Lo: quantileSorted(values, tail), Hi: quantileSorted(values, 1-tail)}, nil
}
