package ab

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ kind.Calling = Kind{}

// Calls implements kind.Calling: one call per vote, labelled by its order (AB, or BA for
// a swapped AC's second call), each panel model's in turn.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	out := make([]records.Call, 0, len(v.Votes))
	for _, vote := range v.Votes {
		out = append(out, records.CallOf(vote.Order, vote.Status, vote.Judge))
	}
	return out
}
