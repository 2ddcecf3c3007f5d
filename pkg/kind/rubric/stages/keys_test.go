package stages

import (
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// The package's tests read batch files of rubric entries: the kind's keys are handed to
// the batch format as pkg/registry hands them, which these tests cannot import.
func init() {
	if err := batch.SetKinds([]batch.KindKeys{{Name: string(events.KindRubric), Keys: Kind{}.BatchKeys()}}); err != nil {
		panic(err)
	}
}
