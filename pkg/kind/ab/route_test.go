package ab

import (
	"fmt"
	"math"
	"testing"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	const below = 1e-9
	tests := []struct {
		winner     Winner
		conf, thr  float64
		wantSug    bool
		wantTag    Tag
		wantImpact Impact
	}{
		// ours
		{WinnerOurs, 1, 0.75, false, "", ""},
		{WinnerOurs, 0.75, 0.75, false, "", ""}, // threshold exactly is clean
		{WinnerOurs, 0.75 - below, 0.75, true, TagPolish, ImpactLow},
		{WinnerOurs, 0, 0.75, true, TagPolish, ImpactLow},
		{WinnerOurs, 0, 0, false, "", ""},
		{WinnerOurs, 0.99, 1, true, TagPolish, ImpactLow},
		{WinnerOurs, 1, 1, false, "", ""},
		// reference: block row
		{WinnerReference, 1, 0.75, true, TagBlock, ImpactHigh},
		{WinnerReference, 0.9, 0.75, true, TagBlock, ImpactHigh}, // 0.9 exactly blocks
		{WinnerReference, 0.9 - below, 0.75, true, TagFix, ImpactMedium},
		// reference: fix row
		{WinnerReference, 0.75, 0.75, true, TagFix, ImpactMedium}, // threshold exactly is fix
		{WinnerReference, 0.75 - below, 0.75, true, TagPolish, ImpactMedium},
		{WinnerReference, 0.8, 0.75, true, TagFix, ImpactMedium},
		// reference: polish row
		{WinnerReference, 0.5, 0.75, true, TagPolish, ImpactMedium},
		{WinnerReference, 0, 0.75, true, TagPolish, ImpactMedium},
		// threshold above 0.9: block stays absolute, fix becomes unreachable
		{WinnerReference, 0.95, 0.95, true, TagBlock, ImpactHigh},
		{WinnerReference, 0.92, 0.95, true, TagBlock, ImpactHigh},
		{WinnerReference, 0.9, 0.95, true, TagBlock, ImpactHigh},
		{WinnerReference, 0.9 - below, 0.95, true, TagPolish, ImpactMedium},
		// threshold exactly 0.9: block takes precedence over fix
		{WinnerReference, 0.9, 0.9, true, TagBlock, ImpactHigh},
		// threshold 0: every reference win below 0.9 is a fix
		{WinnerReference, 0, 0, true, TagFix, ImpactMedium},
		// tie, at any confidence
		{WinnerTie, 1, 0.75, true, TagPolish, ImpactMedium},
		{WinnerTie, 0.95, 0.75, true, TagPolish, ImpactMedium},
		{WinnerTie, 0.75, 0.75, true, TagPolish, ImpactMedium},
		{WinnerTie, 0, 0.75, true, TagPolish, ImpactMedium},
		// out of contract inputs stay on the safe side
		{"", 1, 0.75, true, TagPolish, ImpactMedium},
		{"A", 1, 0.75, true, TagPolish, ImpactMedium},
		{WinnerOurs, math.NaN(), 0.75, true, TagPolish, ImpactLow},
		{WinnerReference, math.NaN(), 0.75, true, TagPolish, ImpactMedium},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s@%v/%v", tc.winner, tc.conf, tc.thr), func(t *testing.T) {
			sug, tag, imp := Route(tc.winner, tc.conf, tc.thr)
			if sug != tc.wantSug || tag != tc.wantTag || imp != tc.wantImpact {
				t.Errorf("Route = %v, %q, %q; want %v, %q, %q", sug, tag, imp, tc.wantSug, tc.wantTag, tc.wantImpact)
			}
		})
	}
}

// The seed's rule, independently of the table: a suggestion exactly when the winner is
// not ours or the confidence is below the threshold.
func TestRouteSuggestRule(t *testing.T) {
	t.Parallel()
	for _, w := range []Winner{WinnerOurs, WinnerReference, WinnerTie} {
		for c := 0.0; c <= 1.0; c += 0.05 {
			for _, thr := range []float64{0, 0.5, 0.75, 0.9, 0.95, 1} {
				sug, tag, imp := Route(w, c, thr)
				if want := w != WinnerOurs || c < thr; sug != want {
					t.Errorf("Route(%s, %v, %v) suggest = %v, want %v", w, c, thr, sug, want)
				}
				if sug != (tag != "") || sug != (imp != "") {
					t.Errorf("Route(%s, %v, %v) = %v, %q, %q: tag and impact must be set iff suggesting", w, c, thr, sug, tag, imp)
				}
			}
		}
	}
}

func TestCheckThreshold(t *testing.T) {
	t.Parallel()
	for _, ok := range []float64{0, 0.5, DefaultThreshold, 1} {
		if err := CheckThreshold(ok); err != nil {
			t.Errorf("CheckThreshold(%v) = %v", ok, err)
		}
	}
	for _, bad := range []float64{-0.1, 1.01, 75, math.NaN(), math.Inf(1)} {
		if err := CheckThreshold(bad); err == nil {
			t.Errorf("CheckThreshold(%v) = nil, want error", bad)
		}
	}
}
