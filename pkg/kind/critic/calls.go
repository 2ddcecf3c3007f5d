package critic

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ kind.Calling = Kind{}

// Calls implements kind.Calling: a critic verdict is one call per trial.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	if c := VoteOf(v.KindPart); c != nil {
		out := []records.Call{records.CallOf("", c.Status, c.Judge)}
		for i, t := range TrialsOf(v.KindTrials) {
			out = append(out, records.CallOf(fmt.Sprintf("trial %d", i+2), t.Status, t.Judge))
		}
		return out
	}
	return nil
}
