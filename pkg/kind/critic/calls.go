package critic

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ kind.Calling = Kind{}

// Calls implements kind.Calling: a critic verdict is one call.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	if c := v.Critic; c != nil {
		return []records.Call{records.CallOf("", c.Status, c.Judge)}
	}
	return nil
}
