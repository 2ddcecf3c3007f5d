package ab

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

var _ kind.Spending = Kind{}

// Asks implements kind.Spending: every model of the panel (or of the ladder), and the
// panel's calls, times the trials (spend.Allowance.Check multiplies).
func (Kind) Asks(spec events.JobSpec) spend.Ask {
	s := SpecOf(spec.KindPart)
	if s == nil {
		return spend.Ask{}
	}
	ask := spend.Ask{Panel: &spend.PanelAsk{Field: "ab.judges", Models: len(s.Judges), Positions: s.Positions}}
	for i, m := range s.Judges {
		ask.Models = append(ask.Models, spend.ModelAsk{Field: fmt.Sprintf("ab.judges[%d]", i), Part: spend.PartJudges, Index: i, Model: m})
	}
	if r := spec.Repeats; r != nil && len(r.Ladder) > 0 {
		// A ladder's every rung may be asked: the worst case counts against the cap.
		ask.Panel = &spend.PanelAsk{Field: "repeats.ladder", Models: len(r.Ladder), Positions: s.Positions}
		for i, m := range r.Ladder {
			ask.Models = append(ask.Models, spend.ModelAsk{Field: fmt.Sprintf("repeats.ladder[%d]", i), Part: spend.PartJudges, Index: i, Model: m})
		}
	}
	return ask
}
