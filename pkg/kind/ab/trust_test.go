package ab

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// TestTrustVocabulary: the trust figures read ab's answers in the generic room's words
// (package trust names no kind), so ab's slot labels and winners must be spelt as they are.
func TestTrustVocabulary(t *testing.T) {
	t.Parallel()
	for _, p := range [][2]string{
		{LabelA, trust.SlotA}, {LabelB, trust.SlotB}, {RawTie, trust.SlotTie},
		{string(WinnerOurs), string(trust.WinnerOurs)}, {string(WinnerReference), string(trust.WinnerReference)},
		{string(WinnerTie), string(trust.WinnerTie)},
	} {
		if p[0] != p[1] {
			t.Errorf("ab spells %q, package trust %q", p[0], p[1])
		}
	}
}
