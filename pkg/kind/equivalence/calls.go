package equivalence

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ kind.Calling = Kind{}

// Calls implements kind.Calling: one call per case, labelled by the case's id.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	out := make([]records.Call, 0, len(v.Cases))
	for _, c := range v.Cases {
		out = append(out, records.CallOf(c.CaseID, c.Status, c.Judge))
	}
	return out
}
