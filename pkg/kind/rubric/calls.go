package rubric

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ kind.Calling = Kind{}

// Calls implements kind.Calling: a rubric verdict is one call.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	if r := rubricwire.VoteOf(v.KindPart); r != nil {
		return []records.Call{records.CallOf("", r.Status, r.Judge)}
	}
	return nil
}
