package stats

import (
	"math"
	"testing"
)

// repeat returns n copies of s.
func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestCohenKappaWorkedExample: the textbook example (50 items: 20 yes/yes, 5 yes/no, 10
// no/yes, 15 no/no) has po 0.70, pe 0.50 and kappa 0.40.
func TestCohenKappaWorkedExample(t *testing.T) {
	var a, b []string
	a = append(append(append(append(a, repeat("yes", 20)...), repeat("yes", 5)...), repeat("no", 10)...), repeat("no", 15)...)
	b = append(append(append(append(b, repeat("yes", 20)...), repeat("no", 5)...), repeat("yes", 10)...), repeat("no", 15)...)
	k, err := CohenKappa(a, b, Z95)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Defined || math.Abs(k.Observed-0.7) > 1e-12 || math.Abs(k.Chance-0.5) > 1e-12 || math.Abs(k.Point-0.4) > 1e-12 {
		t.Fatalf("kappa = %+v, want po 0.7, pe 0.5, kappa 0.4", k)
	}
	// se = sqrt(0.7*0.3/(50*0.25)) = 0.12961
	se := math.Sqrt(0.7 * 0.3 / (50 * 0.25))
	if math.Abs(k.Lo-(0.4-Z95*se)) > 1e-12 || math.Abs(k.Hi-(0.4+Z95*se)) > 1e-12 {
		t.Fatalf("interval [%v, %v], want 0.4 ± %v", k.Lo, k.Hi, Z95*se)
	}
}

// TestCohenKappaUndefined: one label throughout on both sides is chance agreement 1.
func TestCohenKappaUndefined(t *testing.T) {
	k, err := CohenKappa(repeat("A", 5), repeat("A", 5), Z95)
	if err != nil || k.Defined || k.Observed != 1 {
		t.Fatalf("kappa = %+v, %v; want observed 1 and undefined", k, err)
	}
	if _, err := CohenKappa([]string{"A"}, nil, Z95); err == nil {
		t.Fatal("unequal lengths accepted")
	}
}

// TestWeightedKappa checks quadratic weighted kappa against the matrix formula computed
// here independently, and that identical scores give 1.
func TestWeightedKappa(t *testing.T) {
	a := []int{0, 3, 5, 7, 10, 8, 2, 6, 9, 4}
	b := []int{1, 3, 6, 7, 9, 8, 4, 5, 9, 2}
	k, err := WeightedKappa(a, b, 0, 10, BootstrapOptions{Seed: 1, Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	// Independent: 1 - Σ(a-b)² / Σ_i Σ_j (a_i - b_j)² / n.
	n := float64(len(a))
	num, den := 0.0, 0.0
	for i := range a {
		num += float64((a[i] - b[i]) * (a[i] - b[i]))
		for j := range b {
			den += float64((a[i]-b[j])*(a[i]-b[j])) / n
		}
	}
	want := 1 - num/den
	if !k.Defined || math.Abs(k.Point-want) > 1e-12 || k.Lo > k.Point || k.Hi < k.Point {
		t.Fatalf("weighted kappa = %+v, want point %v inside its interval", k, want)
	}
	same, err := WeightedKappa(a, a, 0, 10, BootstrapOptions{Seed: 1, Resamples: 50})
	if err != nil || same.Point != 1 {
		t.Fatalf("identical scores: %+v, %v", same, err)
	}
	if _, err := WeightedKappa([]int{11}, []int{1}, 0, 10, BootstrapOptions{}); err == nil {
		t.Fatal("a score outside the scale accepted")
	}
}

func TestMeanAbsDiff(t *testing.T) {
	iv, err := MeanAbsDiff([]float64{1, 0.5, 0}, []float64{1, 0, 1}, BootstrapOptions{Seed: 3, Resamples: 100})
	if err != nil || math.Abs(iv.Point-0.5) > 1e-12 || iv.Lo > 0.5 || iv.Hi < 0.5 {
		t.Fatalf("mean absolute difference = %+v, %v; want 0.5 inside its interval", iv, err)
	}
}

// TestKappasAreBitForBit: the same scores give the same kappas and intervals to the last
// bit, every time: a report re-derived from the same records prints the same numbers
// (the margins were once summed in a map's order).
func TestKappasAreBitForBit(t *testing.T) {
	var a, b []int
	var la, lb []string
	labels := []string{"ours", "tie", "reference", "x", "y"}
	for i := range 80 {
		a, b = append(a, (i*7)%3), append(b, (i*5+i/3)%3)
		la, lb = append(la, labels[(i*3)%5]), append(lb, labels[(i*2+i/4)%5])
	}
	o := BootstrapOptions{Seed: 3, Resamples: 400}
	w0, err := WeightedKappa(a, b, 0, 2, o)
	if err != nil {
		t.Fatal(err)
	}
	c0, _ := CohenKappa(la, lb, Z95)
	for range 30 {
		if w, _ := WeightedKappa(a, b, 0, 2, o); w != w0 {
			t.Fatalf("weighted kappa %+v, then %+v", w0, w)
		}
		if c, _ := CohenKappa(la, lb, Z95); c != c0 {
			t.Fatalf("kappa %+v, then %+v", c0, c)
		}
	}
}
