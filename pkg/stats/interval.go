package stats

import (
	"fmt"
	"math"
)

// Z95 is the two-sided standard normal quantile of a 95% interval, the z of ZFor(0.95).
const Z95 = 1.959963984540054

// ZFor returns the two-sided standard normal quantile for a confidence level in (0, 1):
// the z such that a standard normal variable lies in [-z, z] with that probability.
func ZFor(level float64) (float64, error) {
	if !(level > 0 && level < 1) {
		return 0, fmt.Errorf("stats: confidence level %v: want a number strictly between 0 and 1", level)
	}
	return math.Sqrt2 * math.Erfinv(level), nil
}

// Interval is a point estimate with a two-sided confidence interval around it.
type Interval struct {
	Point float64 `json:"point"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// Excludes reports whether x lies outside the interval: the estimate differs from x at the
// interval's confidence level.
func (i Interval) Excludes(x float64) bool { return x < i.Lo || x > i.Hi }

// Proportion is K successes out of N trials, with the Wilson score interval of K/N.
type Proportion struct {
	K int `json:"k"`
	N int `json:"n"`
	Interval
}

// String renders "K/N = 0.xxx [lo, hi]", the form the report prints.
func (p Proportion) String() string {
	if p.N == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d = %.3f [%.3f, %.3f]", p.K, p.N, p.Point, p.Lo, p.Hi)
}

// Wilson returns k successes out of n with the Wilson score interval at z (Z95 for 95%).
//
// Wilson rather than the textbook p ± z·sqrt(p(1-p)/n): the judge figures are often small
// samples with rates near 0 or 1 (a flip rate of 0/12, an injection resistance of 8/8),
// where the textbook interval collapses to a point or leaves [0, 1], and Wilson keeps a
// sensible width (Newcombe 1998; Brown, Cai and DasGupta 2001). With n = 0 nothing is
// known: the point is 0 and the interval is all of [0, 1].
//
//	center = (p + z²/2n) / (1 + z²/n)
//	half   = z / (1 + z²/n) · sqrt(p(1-p)/n + z²/4n²)
func Wilson(k, n int, z float64) Proportion {
	out := Proportion{K: k, N: n}
	if n <= 0 || k < 0 || k > n {
		out.Lo, out.Hi = 0, 1
		return out
	}
	nf := float64(n)
	p := float64(k) / nf
	z2 := z * z
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	out.Point = p
	out.Lo = math.Max(0, center-half)
	out.Hi = math.Min(1, center+half)
	// At k = 0 or k = n the interval touches the bound exactly; rounding must not move it
	// off (0/12 "excludes 0" would be nonsense).
	if k == 0 {
		out.Lo = 0
	}
	if k == n {
		out.Hi = 1
	}
	return out
}

// Wilson95 is Wilson at 95%.
func Wilson95(k, n int) Proportion { return Wilson(k, n, Z95) }
