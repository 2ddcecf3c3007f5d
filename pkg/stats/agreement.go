package stats

import (
	"errors"
	"fmt"
	"slices"
)

// Missing is the value of a unit a rater did not rate (a judge whose call failed, or that
// was not asked).
const Missing = ""

// ErrNoPairs means no unit was rated by two raters, so there is nothing to agree on.
var ErrNoPairs = errors.New("no unit has values from two raters")

// ErrNoVariation means every pairable value is the same. Agreement is then perfect but
// alpha is 0/0: the data cannot show whether the raters can tell values apart. Report it
// as "undefined" with the single value, never as 1.
var ErrNoVariation = errors.New("every pairable value is the same")

// Alpha is Krippendorff's alpha with the counts behind it.
type Alpha struct {
	// Alpha is 1 - Do/De: 1 is perfect agreement, 0 is what chance alone gives, below 0
	// is systematic disagreement.
	Alpha float64 `json:"alpha"`
	// Units counts the units rated by at least two raters (the pairable units).
	Units int `json:"units"`
	// Values counts the values in those units (n in Krippendorff's notation).
	Values int `json:"values"`
	// Observed and Expected are the disagreements Do and De.
	Observed float64 `json:"observed"`
	Expected float64 `json:"expected"`
}

// AlphaNominal computes Krippendorff's alpha for nominal values from reliability data:
// data[r][u] is rater r's value for unit u, Missing when rater r gave none. Every row
// must have the same length. Units with fewer than two values are not pairable and are
// left out, as the method prescribes; missing values need no imputation.
//
// It follows Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011), section
// C: within each unit u with m_u values, every ordered pair of values from different
// raters adds 1/(m_u - 1) to the coincidence matrix o_ck; n_c are its marginals and n
// their sum. For nominal data the difference of two values is 0 when equal and 1 when not:
//
//	alpha = 1 - Do/De = 1 - (n - 1) · Σ_{c≠k} o_ck / Σ_{c≠k} n_c·n_k
//
// It adds the units to Coincidences in column order, so a caller that reads its units
// one at a time gets the same bits. It returns ErrNoPairs or ErrNoVariation (wrapped)
// when alpha is undefined.
func AlphaNominal(data [][]string) (Alpha, error) {
	units, err := width(data)
	if err != nil {
		return Alpha{}, err
	}
	var c Coincidences
	unit := make([]string, len(data))
	for u := range units {
		for r := range data {
			unit[r] = data[r][u]
		}
		c.Add(unit)
	}
	return c.Alpha()
}

// Coincidences accumulates Krippendorff's nominal coincidences unit by unit, holding
// integer counts only (per unit size m and value pair) and never the units, so alpha
// over a million units takes the memory of a few values.
//
// The counts are integers, and o_ck is built from them at the end as Σ_m S_m,ck/(m-1),
// m ascending, values in sorted order: the result depends on the units, not on the order
// they came in, and has one rounding per term where adding 1/(m-1) unit by unit has one a
// unit. With units of two or three values (panels of up to three raters) every term is
// exact either way, so the bits are those of the unit-by-unit sum; with larger units they
// may differ from it in the last bits (under 1e-12 on the tests' randomized data).
// The zero value is ready to use.
type Coincidences struct {
	index  map[string]int // value -> its number, in first-seen order
	values []string
	pairs  map[coincidence]int
	sizes  []int // the unit sizes m seen, unsorted
	counts []int // scratch: one unit's count per value number
	units  int
	n      int
}

// coincidence names an integer count: ordered pairs (c, d) of values within units of m.
type coincidence struct{ m, c, d int }

// Add counts one unit's values, one per rater, Missing for a rater that gave none. A
// unit with fewer than two values is not pairable and counts for nothing.
func (a *Coincidences) Add(unit []string) {
	m := 0
	for _, v := range unit {
		if v != Missing {
			m++
		}
	}
	if m < 2 {
		return
	}
	if a.index == nil {
		a.index, a.pairs = map[string]int{}, map[coincidence]int{}
	}
	for _, v := range unit {
		if v == Missing {
			continue
		}
		if _, ok := a.index[v]; !ok {
			a.index[v] = len(a.values)
			a.values = append(a.values, v)
			a.counts = append(a.counts, 0)
		}
		a.counts[a.index[v]]++
	}
	if !slices.Contains(a.sizes, m) {
		a.sizes = append(a.sizes, m)
	}
	a.units++
	a.n += m
	for c, nc := range a.counts {
		if nc == 0 {
			continue
		}
		for d, nd := range a.counts {
			pairs := nc * nd
			if c == d {
				pairs = nc * (nc - 1)
			}
			if pairs > 0 {
				a.pairs[coincidence{m, c, d}] += pairs
			}
		}
	}
	clear(a.counts)
}

// Alpha computes alpha over the units added. It returns ErrNoPairs or ErrNoVariation
// (wrapped) when alpha is undefined.
func (a *Coincidences) Alpha() (Alpha, error) {
	out := Alpha{Units: a.units, Values: a.n}
	if a.units == 0 {
		return out, fmt.Errorf("stats: krippendorff alpha: %w", ErrNoPairs)
	}
	// Values in sorted order and sizes ascending, so the sums run in one order whatever
	// order the units came in.
	sorted := slices.Clone(a.values)
	slices.Sort(sorted)
	sizes := slices.Clone(a.sizes)
	slices.Sort(sizes)
	k := len(sorted)
	coincide := make([]float64, k*k) // o_ck at [c*k+k'], in sorted value order
	for c, vc := range sorted {
		for d, vd := range sorted {
			for _, m := range sizes {
				if p := a.pairs[coincidence{m, a.index[vc], a.index[vd]}]; p > 0 {
					coincide[c*k+d] += float64(p) / float64(m-1)
				}
			}
		}
	}
	n := float64(a.n)
	var disagree, sumSq float64
	for c := range k {
		nc := 0.0
		for d := range k {
			nc += coincide[c*k+d]
			if c != d {
				disagree += coincide[c*k+d]
			}
		}
		sumSq += nc * nc
	}
	chance := n*n - sumSq // Σ_{c≠k} n_c·n_k
	if chance == 0 {
		return out, fmt.Errorf("stats: krippendorff alpha: %w", ErrNoVariation)
	}
	out.Observed = disagree / n
	out.Expected = chance / (n * (n - 1))
	out.Alpha = 1 - out.Observed/out.Expected
	return out, nil
}

// PairAgreement is how often two raters gave the same value, over the units both rated.
type PairAgreement struct {
	// I and J index the raters (rows of the data), I < J.
	I int `json:"i"`
	J int `json:"j"`
	Proportion
}

// PairwiseAgreement returns, for every pair of raters, the share of units both rated on
// which they gave the same value, with its Wilson interval at z. It is the plain figure
// next to alpha: easy to read, but not corrected for chance (two raters who answer "tie"
// to everything agree 100%, and alpha says the data are undefined).
func PairwiseAgreement(data [][]string, z float64) ([]PairAgreement, error) {
	units, err := width(data)
	if err != nil {
		return nil, err
	}
	var out []PairAgreement
	for i := range data {
		for j := i + 1; j < len(data); j++ {
			agree, both := 0, 0
			for u := range units {
				a, b := data[i][u], data[j][u]
				if a == Missing || b == Missing {
					continue
				}
				both++
				if a == b {
					agree++
				}
			}
			out = append(out, PairAgreement{I: i, J: j, Proportion: Wilson(agree, both, z)})
		}
	}
	return out, nil
}

// width checks that every row of reliability data has the same number of units.
func width(data [][]string) (int, error) {
	if len(data) == 0 {
		return 0, nil
	}
	units := len(data[0])
	if i := slices.IndexFunc(data, func(row []string) bool { return len(row) != units }); i >= 0 {
		return 0, fmt.Errorf("stats: reliability data row %d has %d units, row 0 has %d", i, len(data[i]), units)
	}
	return units, nil
}
