package equivalence

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

var _ kind.Spending = Kind{}

// Asks implements kind.Spending: the runner's model.
func (Kind) Asks(spec events.JobSpec) spend.Ask {
	eq := SpecOf(spec.KindPart)
	if eq == nil {
		return spend.Ask{}
	}
	return spend.Ask{Models: []spend.ModelAsk{{Field: "equivalence.runner_model", Part: spend.PartRunnerModel, Model: eq.RunnerModel}}}
}
