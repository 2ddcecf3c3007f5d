package stats

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"
)

// reference is what testdata/reference.py --json prints.
type reference struct {
	Z95, Z90  float64
	Wilson95  [][4]float64
	Wilson90  [][4]float64
	Quantiles struct{ Data, Cuts []float64 }
	Bootstrap []struct {
		Items         []float64
		Stat          string
		Resamples     int
		Level         float64
		Seed          uint64
		Point, Lo, Hi float64
	}
	PCG12 []uint64 `json:"pcg_1_2"`
	Alpha map[string]float64
}

// TestReferenceScript runs the independent Python implementation (standard library only)
// and checks every value it computes against this package, so the values pasted in the
// other tests cannot drift from the script that justifies them.
func TestReferenceScript(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH: the pasted reference values in the other tests still apply")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/reference.py", "--json").Output()
	if err != nil {
		t.Fatalf("reference.py: %v", err)
	}
	var ref reference
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("reference.py output: %v", err)
	}
	if z, _ := ZFor(0.95); !near(z, ref.Z95, 1e-9) || !near(Z95, ref.Z95, 1e-15) {
		t.Errorf("z95 %v, python %v", z, ref.Z95)
	}
	z90, _ := ZFor(0.90)
	if !near(z90, ref.Z90, 1e-9) {
		t.Errorf("z90 %v, python %v", z90, ref.Z90)
	}
	for _, set := range []struct {
		z    float64
		rows [][4]float64
	}{{Z95, ref.Wilson95}, {ref.Z90, ref.Wilson90}} {
		for _, w := range set.rows {
			p := Wilson(int(w[0]), int(w[1]), set.z)
			if !near(p.Lo, w[2], tol) || !near(p.Hi, w[3], tol) {
				t.Errorf("Wilson(%v, %v) = [%v, %v], python [%v, %v]", w[0], w[1], p.Lo, p.Hi, w[2], w[3])
			}
		}
	}
	for i, c := range ref.Quantiles.Cuts {
		p := float64(i+1) / float64(len(ref.Quantiles.Cuts)+1)
		if got := Quantile(ref.Quantiles.Data, p); !near(got, c, tol) {
			t.Errorf("Quantile(%v) = %v, python %v", p, got, c)
		}
	}
	pcg := rand.NewPCG(1, 2)
	for i, want := range ref.PCG12 {
		if got := pcg.Uint64(); got != want {
			t.Errorf("PCG(1,2) value %d = %#x, python %#x", i, got, want)
		}
	}
	stats := map[string]func([]float64) float64{"mean": mean, "median": median}
	for _, b := range ref.Bootstrap {
		got, err := Bootstrap(b.Items, stats[b.Stat], BootstrapOptions{Resamples: b.Resamples, Level: b.Level, Seed: b.Seed})
		if err != nil {
			t.Fatal(err)
		}
		if !near(got.Point, b.Point, 1e-9) || !near(got.Lo, b.Lo, 1e-9) || !near(got.Hi, b.Hi, 1e-9) {
			t.Errorf("bootstrap %s seed %d: %+v, python %v %v %v", b.Stat, b.Seed, got, b.Point, b.Lo, b.Hi)
		}
	}
	if len(ref.Alpha) != len(alphaData) {
		t.Errorf("python computed %d alphas, the tests hold %d data sets", len(ref.Alpha), len(alphaData))
	}
	for name, want := range ref.Alpha {
		a, err := AlphaNominal(alphaData[name])
		if err != nil || !near(a.Alpha, want, tol) {
			t.Errorf("alpha %s = %v (%v), python %v", name, a.Alpha, err, want)
		}
	}
}
