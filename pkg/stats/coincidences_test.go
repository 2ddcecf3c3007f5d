package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCoincidencesMatchTheUnitByUnitSum: alpha from integer coincidence counts (what
// AlphaNominal and Coincidences compute now) against the unit-by-unit float sum it
// replaced (alphaNominalReference), on randomized reliability data: the same bits with
// units of up to three values, where every term of either sum is exact; within 1e-12
// with more raters, where 1/(m-1) rounds. Shuffling the units never changes the bits.
func TestCoincidencesMatchTheUnitByUnitSum(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(29, 5))
	values := []string{"ours", "reference", "tie", "x"}
	var exactRuns, maxDiff = 0, 0.0
	for run := range 3000 {
		raters := 2 + rng.IntN(6)
		units := 1 + rng.IntN(200)
		kinds := 1 + rng.IntN(len(values))
		missing := rng.Float64() * 0.6
		data := make([][]string, raters)
		for r := range data {
			data[r] = make([]string, units)
			for u := range data[r] {
				if rng.Float64() >= missing {
					data[r][u] = values[rng.IntN(kinds)]
				}
			}
		}
		want, werr := alphaNominalReference(data)
		got, gerr := AlphaNominal(data)
		name := fmt.Sprintf("run %d (%d raters, %d units)", run, raters, units)
		if !errors.Is(gerr, errors.Unwrap(werr)) || (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: error %v, reference %v", name, gerr, werr)
		}
		if got.Units != want.Units || got.Values != want.Values {
			t.Fatalf("%s: units %d values %d, reference %d and %d", name, got.Units, got.Values, want.Units, want.Values)
		}
		if werr != nil {
			continue
		}
		if raters <= 3 {
			exactRuns++
			if got != want {
				t.Fatalf("%s: %+v, reference %+v: not the same bits", name, got, want)
			}
		} else if d := math.Abs(got.Alpha - want.Alpha); d >= 1e-12 || math.Abs(got.Observed-want.Observed) >= 1e-12 || math.Abs(got.Expected-want.Expected) >= 1e-12 {
			t.Fatalf("%s: %+v, reference %+v", name, got, want)
		} else {
			maxDiff = max(maxDiff, d)
		}
		// Units in any order: the same bits.
		var c Coincidences
		cols := rng.Perm(units)
		unit := make([]string, raters)
		for _, u := range cols {
			for r := range data {
				unit[r] = data[r][u]
			}
			c.Add(unit)
		}
		if shuffled, err := c.Alpha(); err != nil || shuffled != got {
			t.Fatalf("%s: units shuffled %+v (%v), in order %+v", name, shuffled, err, got)
		}
	}
	if exactRuns == 0 {
		t.Fatal("no run with up to three raters")
	}
	t.Logf("%d runs with up to three raters bit for bit; with more, alpha within %.2g of the reference", exactRuns, maxDiff)
}

// TestCoincidencesUndefined: no pairable unit, and one value only, as AlphaNominal says.
func TestCoincidencesUndefined(t *testing.T) {
	t.Parallel()
	var c Coincidences
	if _, err := c.Alpha(); !errors.Is(err, ErrNoPairs) {
		t.Errorf("nothing added: %v", err)
	}
	c.Add([]string{"a", N})
	if _, err := c.Alpha(); !errors.Is(err, ErrNoPairs) {
		t.Errorf("one value: %v", err)
	}
	c.Add([]string{"a", "a", N})
	if a, err := c.Alpha(); !errors.Is(err, ErrNoVariation) || a.Units != 1 || a.Values != 2 {
		t.Errorf("one value only: %+v %v", a, err)
	}
}

// alphaNominalReference is AlphaNominal as it was before Coincidences: 1/(m-1) added to
// o_ck unit by unit, in column order. The tests hold the counting version to it.
func alphaNominalReference(data [][]string) (Alpha, error) {
	units, err := width(data)
	if err != nil {
		return Alpha{}, err
	}
	// Values are indexed in sorted order and summed in that order, so the same data give
	// the same bits on every run (map order would not).
	var domain []string
	for _, row := range data {
		for _, v := range row {
			if v != Missing {
				domain = append(domain, v)
			}
		}
	}
	slices.Sort(domain)
	domain = slices.Compact(domain)
	index := make(map[string]int, len(domain))
	for i, v := range domain {
		index[v] = i
	}
	k := len(domain)
	coincide := make([]float64, k*k) // o_ck at [c*k+k']
	counts := make([]int, k)
	var out Alpha
	for u := range units {
		clear(counts)
		m := 0
		for r := range data {
			if v := data[r][u]; v != Missing {
				counts[index[v]]++
				m++
			}
		}
		if m < 2 {
			continue
		}
		out.Units++
		out.Values += m
		for c, nc := range counts {
			for d, nd := range counts {
				pairs := nc * nd
				if c == d {
					pairs = nc * (nc - 1)
				}
				coincide[c*k+d] += float64(pairs) / float64(m-1)
			}
		}
	}
	if out.Units == 0 {
		return out, fmt.Errorf("stats: krippendorff alpha: %w", ErrNoPairs)
	}
	n := float64(out.Values)
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
