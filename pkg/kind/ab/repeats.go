package ab

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

var _ kind.Repeating = Kind{}

// RefuseRepeats implements kind.Repeating: ab takes trials (majority of the winners) and a
// judge ladder (escalating on confidence, a swap flip or trial disagreement).
func (Kind) RefuseRepeats(*events.Repeats) string { return "" }
