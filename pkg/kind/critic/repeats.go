package critic

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

var _ kind.Repeating = Kind{}

// RefuseRepeats implements kind.Repeating: trials (the median of each score), no ladder.
func (Kind) RefuseRepeats(r *events.Repeats) string { return kind.NoLadder(events.KindCritic, r) }
