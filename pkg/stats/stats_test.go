package stats

import (
	"errors"
	"math"
	"slices"
	"testing"
)

const tol = 1e-12

func near(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

func TestZFor(t *testing.T) {
	t.Parallel()
	// Python: statistics.NormalDist().inv_cdf(0.975) = 1.9599639845400536,
	// inv_cdf(0.95) = 1.6448536269514715 (testdata/reference.py).
	for _, tc := range []struct{ level, want float64 }{{0.95, 1.9599639845400536}, {0.90, 1.6448536269514715}} {
		got, err := ZFor(tc.level)
		if err != nil || !near(got, tc.want, 1e-9) {
			t.Errorf("ZFor(%v) = %v, %v; want %v", tc.level, got, err, tc.want)
		}
	}
	if !near(Z95, 1.9599639845400536, 1e-15) {
		t.Errorf("Z95 = %v", Z95)
	}
	for _, bad := range []float64{0, 1, -0.5, 1.5, math.NaN()} {
		if _, err := ZFor(bad); err == nil {
			t.Errorf("ZFor(%v) accepted", bad)
		}
	}
}

func TestWilson(t *testing.T) {
	t.Parallel()
	z90, _ := ZFor(0.90)
	tests := []struct {
		name   string
		k, n   int
		z      float64
		lo, hi float64
		eps    float64
	}{
		// Published: Newcombe (1998), "Two-sided confidence intervals for the single
		// proportion", Statistics in Medicine 17, table II, method 3 (score, no continuity
		// correction), given to 4 decimals.
		{"newcombe 81/263", 81, 263, Z95, 0.2553, 0.3662, 5e-5},
		{"newcombe 15/148", 15, 148, Z95, 0.0624, 0.1605, 5e-5},
		{"newcombe 0/20", 0, 20, Z95, 0, 0.1611, 5e-5},
		{"newcombe 1/29", 1, 29, Z95, 0.0061, 0.1718, 5e-5},
		// testdata/reference.py (the score interval solved as a quadratic).
		{"81/263 exact", 81, 263, Z95, 0.2552885198782742, 0.3662095769828002, tol},
		{"7/10", 7, 10, Z95, 0.3967781474611453, 0.892208732593699, tol},
		{"52/100", 52, 100, Z95, 0.4231657776522396, 0.615354482419481, tol},
		{"70/100", 70, 100, Z95, 0.6041514536665331, 0.7810511470506725, tol},
		{"600/1000", 600, 1000, Z95, 0.5693094295142662, 0.6299252187886227, tol},
		{"7/10 at 90%", 7, 10, z90, 0.44169979586983515, 0.8731234160968019, 1e-9},
		// By hand: all successes touch 1 exactly.
		{"12/12", 12, 12, Z95, 0.7575, 1, 5e-5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Wilson(tc.k, tc.n, tc.z)
			if !near(p.Lo, tc.lo, tc.eps) || !near(p.Hi, tc.hi, tc.eps) {
				t.Errorf("Wilson(%d, %d) = [%v, %v]; want [%v, %v]", tc.k, tc.n, p.Lo, p.Hi, tc.lo, tc.hi)
			}
			if p.Point != float64(tc.k)/float64(tc.n) || p.K != tc.k || p.N != tc.n {
				t.Errorf("point %v k %d n %d", p.Point, p.K, p.N)
			}
		})
	}
	if p := Wilson95(0, 0); p.Lo != 0 || p.Hi != 1 || p.Point != 0 || p.String() != "0/0" {
		t.Errorf("no trials: %+v %q", p, p)
	}
	// 70/100 excludes 0.5; 52/100 does not: the rule position bias is flagged by.
	if !Wilson95(70, 100).Excludes(0.5) || Wilson95(52, 100).Excludes(0.5) {
		t.Error("Excludes(0.5) wrong for 70/100 or 52/100")
	}
	if got := Wilson95(7, 10).String(); got != "7/10 = 0.700 [0.397, 0.892]" {
		t.Errorf("String = %q", got)
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	data := []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	// Python: statistics.quantiles(data, n=20, method="inclusive") gives the 5%, 10%, ...,
	// 95% cut points (testdata/reference.py).
	want := []float64{1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.0, 3.0, 3.5, 4.0, 4.5, 5.0, 5.0, 5.0, 5.0, 5.0, 5.5, 6.0, 7.5}
	for i, w := range want {
		p := float64(i+1) / 20
		if got := Quantile(data, p); !near(got, w, tol) {
			t.Errorf("Quantile(%v) = %v, want %v", p, got, w)
		}
	}
	if Quantile(data, 0) != 1 || Quantile(data, 1) != 9 || Quantile(data, 0.5) != 4 {
		t.Error("min, max or median wrong")
	}
	if !slices.Equal(data, []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}) {
		t.Error("Quantile sorted its input")
	}
	if !math.IsNaN(Quantile(nil, 0.5)) || !math.IsNaN(Quantile(data, 1.5)) {
		t.Error("want NaN for no values or p out of range")
	}
	if Quantile([]float64{42}, 0.95) != 42 {
		t.Error("one value")
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func median(xs []float64) float64 { return Quantile(xs, 0.5) }

func TestBootstrap(t *testing.T) {
	t.Parallel()
	spread := make([]float64, 30)
	for i := range spread {
		spread[i] = float64(i * i % 17)
	}
	wins := append(slices.Repeat([]float64{1}, 14), slices.Repeat([]float64{0}, 26)...)
	tests := []struct {
		name  string
		items []float64
		stat  func([]float64) float64
		o     BootstrapOptions
		want  Interval
	}{
		// Every row: testdata/reference.py, which reimplements Go's PCG (checked against
		// math/rand/v2's own test vectors) and the resampling in Python.
		{"mean, seed 7", spread, mean, BootstrapOptions{Resamples: 500, Seed: 7}, Interval{8.066666666666666, 6.249166666666667, 10.001666666666665}},
		{"mean, seed 8", spread, mean, BootstrapOptions{Resamples: 500, Seed: 8}, Interval{8.066666666666666, 6.033333333333333, 10.166666666666666}},
		{"median, seed 7", spread, median, BootstrapOptions{Resamples: 300, Seed: 7}, Interval{8, 4, 13}},
		{"win rate, defaults", wins, mean, BootstrapOptions{Seed: 1}, Interval{0.35, 0.2, 0.5}},
		{"scores at 90%", []float64{1, 0.5, 0, 1, 1, 0.5, 0, 1, 1, 0}, mean, BootstrapOptions{Resamples: 200, Level: 0.90, Seed: 42}, Interval{0.6, 0.35, 0.8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Bootstrap(tc.items, tc.stat, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got.Point, tc.want.Point, 1e-9) || !near(got.Lo, tc.want.Lo, 1e-9) || !near(got.Hi, tc.want.Hi, 1e-9) {
				t.Errorf("Bootstrap = %+v, want %+v", got, tc.want)
			}
			again, _ := Bootstrap(tc.items, tc.stat, tc.o)
			if again != got {
				t.Errorf("not deterministic: %+v then %+v", got, again)
			}
		})
	}
	// The bootstrap interval of a win rate is close to Wilson's for a moderate n: a sanity
	// check that the percentile method is wired the right way round.
	w := Wilson95(14, 40)
	b, _ := Bootstrap(wins, mean, BootstrapOptions{Resamples: 2000, Seed: 3})
	if !near(b.Lo, w.Lo, 0.05) || !near(b.Hi, w.Hi, 0.05) {
		t.Errorf("bootstrap %+v far from Wilson %v", b, w)
	}
	if _, err := Bootstrap([]float64{}, mean, BootstrapOptions{}); err == nil {
		t.Error("no items accepted")
	}
	if _, err := Bootstrap(wins, mean, BootstrapOptions{Level: 2}); err == nil {
		t.Error("level 2 accepted")
	}
	if _, err := Bootstrap(wins, mean, BootstrapOptions{Resamples: -1}); err == nil {
		t.Error("negative resamples accepted")
	}
	if _, err := Bootstrap(wins, func([]float64) float64 { return math.NaN() }, BootstrapOptions{}); err == nil {
		t.Error("NaN statistic accepted")
	}
}

// Reliability data of the alpha tests, by the name testdata/reference.py prints them under.
var alphaData = map[string][][]string{
	"k2011": {
		{"1", "2", "3", "3", "2", "1", "4", "1", "2", N, N, N},
		{"1", "2", "3", "3", "2", "2", "4", "1", "2", "5", N, "3"},
		{N, "3", "3", "3", "2", "3", "4", "2", "2", "5", "1", N},
		{"1", "2", "3", "3", "2", "4", "4", "1", "2", "5", "1", N},
	},
	"three coders": {
		{N, N, N, N, N, "3", "4", "1", "2", "1", "1", "3", "3", N, "3"},
		{"1", N, "2", "1", "3", "3", "4", "3", N, N, N, N, N, N, N},
		{N, N, "2", "1", "3", "4", "4", N, "2", "1", "1", "3", "3", N, "4"},
	},
	"string labels": {
		{"pos", "neg", "neu", N},
		{"pos", "neg", "neu", "pos"},
		{"pos", "neg", "pos", "pos"},
	},
	"two judges": {
		{"ours", "ours", "reference", "tie", "ours", "reference", "reference", "ours", "tie", "ours"},
		{"ours", "reference", "reference", "tie", "ours", "reference", "ours", "ours", "tie", "ours"},
	},
}

// N marks a missing value in the tests' reliability data.
const N = Missing

func TestAlphaNominal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data [][]string
		want float64
		eps  float64
	}{
		// Published: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability",
		// section C (nominal data, 4 observers, 12 units, missing values): alpha = 0.743.
		{"krippendorff 2011 nominal", alphaData["k2011"], 0.743, 5e-4},
		// The same data to full precision: testdata/reference.py (Do from within-unit
		// pairs, De from value counts, no coincidence matrix): 0.743421052631579.
		{"krippendorff 2011 exact", alphaData["k2011"], 0.743421052631579, tol},
		// Published in the test suite of the krippendorff Python package
		// (pln-fing-udelar/fast-krippendorff), nominal: 0.691358 and 0.722222 to six
		// decimals; full values from testdata/reference.py.
		{"three coders, fifteen units", alphaData["three coders"], 0.691358024691358, tol},
		{"string labels", alphaData["string labels"], 0.7222222222222222, tol},
		{"two judges, two disagreements", alphaData["two judges"], 0.6935483870967742, tol},
		// By hand: identical ratings agree perfectly.
		{"perfect", [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}}, 1, tol},
		// By hand: two raters always disagreeing on two values, one unit each way:
		// o_ab = o_ba = 2, n = 4, n_a = n_b = 2; alpha = 1 - 3·4/8 = -0.5.
		{"systematic disagreement", [][]string{{"a", "b"}, {"b", "a"}}, -0.5, tol},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AlphaNominal(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got.Alpha, tc.want, tc.eps) {
				t.Errorf("alpha = %v, want %v", got.Alpha, tc.want)
			}
		})
	}
	// Counts behind the 2011 example: unit 12 has one value and is left out; n = 40.
	a, _ := AlphaNominal(tests[0].data)
	if a.Units != 11 || a.Values != 40 {
		t.Errorf("units %d values %d, want 11 and 40", a.Units, a.Values)
	}
	if _, err := AlphaNominal([][]string{{"a", N}, {N, "b"}}); !errors.Is(err, ErrNoPairs) {
		t.Errorf("no pairable unit: %v", err)
	}
	if _, err := AlphaNominal([][]string{{"tie", "tie"}, {"tie", "tie", "x"}}); err == nil {
		t.Error("ragged rows accepted")
	}
	if _, err := AlphaNominal([][]string{{"tie", "tie", "x"}, {"tie", "tie", N}}); !errors.Is(err, ErrNoVariation) {
		t.Errorf("one value only: %v", err)
	}
}

func TestPairwiseAgreement(t *testing.T) {
	t.Parallel()
	data := [][]string{
		{"a", "b", "a", "a", N},
		{"a", "b", "b", N, "a"},
		{"a", "a", "b", "a", "a"},
	}
	got, err := PairwiseAgreement(data, Z95)
	if err != nil {
		t.Fatal(err)
	}
	// By hand: raters 0,1 share units 0-2 and agree on 2; 0,2 share 0-3 and agree on 2
	// (units 0 and 3); 1,2 share 0,1,2,4 and agree on 3 (units 0, 2, 4).
	want := []struct{ i, j, k, n int }{{0, 1, 2, 3}, {0, 2, 2, 4}, {1, 2, 3, 4}}
	if len(got) != len(want) {
		t.Fatalf("%d pairs", len(got))
	}
	for x, w := range want {
		g := got[x]
		if g.I != w.i || g.J != w.j || g.K != w.k || g.N != w.n || g.Proportion != Wilson95(w.k, w.n) {
			t.Errorf("pair %d: %+v, want %+v", x, g, w)
		}
	}
}
