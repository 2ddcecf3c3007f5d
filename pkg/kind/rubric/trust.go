package rubric

import (
	"encoding/json"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// rubric's verdicts grade the dimensions a person's HE-2 spot check names (package trust).
var _ trust.Dimensioned = Kind{}

// Dimensions implements trust.Dimensioned: the dimensions a valid rubric verdict graded.
// The names only: the aggregator judged the verdict's validity already.
func (Kind) Dimensions(v *events.VerdictEmitted) []string {
	r := rubricwire.VoteOf(v.KindPart)
	if r == nil || r.Status != events.VoteOK {
		return nil
	}
	var a struct {
		Dimensions map[string]json.RawMessage `json:"dimensions"`
	}
	if json.Unmarshal([]byte(r.Verdict), &a) != nil {
		return nil
	}
	out := make([]string, 0, len(a.Dimensions))
	for d := range a.Dimensions {
		out = append(out, d)
	}
	return out
}
