package rubric

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
)

// ViewState is a rubric job's own state (kind.State): its view's record, kept in the views
// bucket across the view's iterations and batches, and the rubric the view is judged
// against.
type ViewState struct {
	Record views.Record
	Rubric *argus.Rubric
}

// Clone implements kind.State. The rubric is read only, so it is shared.
func (s *ViewState) Clone() kind.State {
	c := *s
	c.Record = s.Record.Clone()
	return &c
}

// Encode implements kind.State: the view's record as the views bucket keeps it.
func (s *ViewState) Encode() ([]byte, error) { return json.Marshal(s.Record) }

// StateDocuments implements kind.Looping: the rubric the view is judged with.
func (Kind) StateDocuments(spec events.JobSpec) []events.Blob {
	if rubricwire.SpecOf(spec.KindPart) == nil || rubricwire.SpecOf(spec.KindPart).Blocked != "" {
		return nil
	}
	return []events.Blob{rubricwire.SpecOf(spec.KindPart).Rubric}
}

// LoadState implements kind.Looping: the view's record (a zero record for a view never
// stored) and its rubric.
func (Kind) LoadState(spec events.JobSpec, stored []byte, docs [][]byte) (kind.State, error) {
	s := &ViewState{}
	if stored != nil {
		if err := json.Unmarshal(stored, &s.Record); err != nil {
			return nil, fmt.Errorf("view %s: corrupt record: %w", spec.ACID, err)
		}
	}
	if len(docs) > 0 {
		r, err := argus.ParseRubric(docs[0])
		if err != nil {
			return nil, fmt.Errorf("view %s: rubric: %w", spec.ACID, err)
		}
		s.Rubric = r
	}
	return s, nil
}

// Reset implements kind.Looping: the view's next step starts a new loop with a fresh
// budget (views.Record.ResetLoop); a reset of a loop the view has replaced since, or of a
// view with no loop yet, changes nothing.
func (Kind) Reset(st kind.State, ev events.Event, p *events.ViewReset, now time.Time) bool {
	s, ok := st.(*ViewState)
	if !ok {
		return false
	}
	return s.Record.ResetLoop(p.Loop, views.Reset{Event: ev.ID, At: now, By: p.By, Reason: p.Reason})
}

// viewOf is the view state a step carries, nil when the caller gave none.
func viewOf(st *kind.Step) *ViewState {
	s, _ := st.State.(*ViewState)
	return s
}
