package rubric

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

var _ kind.Repeating = Kind{}

// RefuseRepeats implements kind.Repeating: a rubric view takes neither trials nor a
// ladder. Its loop is its repetition: every iteration is judged anew and a view signs off
// only on consecutive passes (seed 004's streak) with a person's spot check; trials within
// an iteration would spend calls the streak already spends and give the loop a verdict the
// seed's loop never reads.
func (Kind) RefuseRepeats(r *events.Repeats) string {
	field := "trials"
	if r.K() <= 1 && len(r.Ladder) > 0 {
		field = "ladder"
	}
	return field + ": the rubric kind takes no trials or ladder: its loop judges every iteration anew and signs off only on consecutive passes, which is its repetition"
}
