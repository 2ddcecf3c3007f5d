package stats

import (
	"math"
	"slices"
)

// Quantile returns the p-quantile (0 <= p <= 1) of the values by linear interpolation
// between order statistics: h = (n-1)·p, x[⌊h⌋] + (h-⌊h⌋)·(x[⌊h⌋+1] - x[⌊h⌋]). This is
// Hyndman and Fan's type 7, the default of R, NumPy and pandas (so Arena-Hard's bootstrap
// quantiles), and Python's statistics.quantiles(method="inclusive"). The values need not
// be sorted and are not modified. An empty input or a p outside [0, 1] gives NaN.
func Quantile(values []float64, p float64) float64 {
	if len(values) == 0 || !(p >= 0 && p <= 1) {
		return math.NaN()
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return quantileSorted(s, p)
}

func quantileSorted(s []float64, p float64) float64 {
	h := float64(len(s)-1) * p
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}
