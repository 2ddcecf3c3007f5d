package equivalence

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

var _ kind.Repeating = Kind{}

// RefuseRepeats implements kind.Repeating: trials (each case's majority), no ladder.
func (Kind) RefuseRepeats(r *events.Repeats) string {
	return kind.NoLadder(events.KindEquivalence, r)
}
