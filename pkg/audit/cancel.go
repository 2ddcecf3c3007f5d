package audit

import (
	"errors"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// errPlanUnread marks a cancel step whose plan page the audit could not read.
var errPlanUnread = errors.New("plan page unread")

// planOf reads a page of a batch's plan for the rules' cancel steps.
func (a *auditor) planOf(tenant string, ref events.Blob) (*records.PlanPage, error) {
	if a.store == nil {
		return nil, fmt.Errorf("%w: the audit was given no blob store", errPlanUnread)
	}
	data, err := a.readBlob(tenant, ref.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPlanUnread, err)
	}
	return records.DecodePlanPage(data)
}

// isCancel reports whether r is one of a cancel's events.
func isCancel(r *Recorded) bool {
	switch r.Event.Payload.(type) {
	case *events.BatchCancelRequested, *events.JobCancelRequested:
		return true
	}
	return false
}

// cancelPlace is where the replay applies one job's cancel.
type cancelPlace struct {
	cancel *Recorded
	// first: before any other input of the job. Else after anchor (nil: where the
	// stream holds the cancel).
	first  bool
	anchor *Recorded
}

// cancels places each job's cancel in the replay where the aggregator applied it.
//
// A cancel races with the job's own events: the aggregator applies its inputs
// concurrently, so it may cancel a job before an earlier-stored verdict reaches it, or
// before its submission does, and apply a later-stored verdict first. The race leaves no
// event of its own, but its outcome is recorded: the job's final outcome names the input
// it was derived from (its causation), and every input the aggregator applied while the
// job was still open left outputs of its own (the submission's render request, a loop's
// decisions), while one applied after the job was final left none. So a cancel that
// decided its job goes right after the last of the job's inputs with outputs (before all
// of them when there are none: it overtook the submission too), and a cancel that found
// its job decided goes after the input that decided it. The cancel rule makes everything
// else irrelevant: it records the job from the cancel alone (rulebook.cancelled).
type cancels struct {
	byJob    map[jobKey]*cancelPlace
	byCancel map[*Recorded]*cancelPlace
	applied  map[*Recorded]bool
}

// cancelOrder works out where each audited job's cancel goes.
func (a *auditor) cancelOrder() *cancels {
	c := &cancels{byJob: map[jobKey]*cancelPlace{}, byCancel: map[*Recorded]*cancelPlace{}, applied: map[*Recorded]bool{}}
	inputs := map[jobKey][]*Recorded{}
	caused := map[string]bool{}
	outcome := map[jobKey]*Recorded{}
	for _, r := range a.recs {
		if r.History || !r.OK() {
			continue
		}
		ev := r.Event
		if r.DeadLetter == "" && isOutput(r) && ev.CausationID != "" {
			caused[ev.CausationID] = true
			if isOutcome(ev) && ev.Attempt == 0 {
				k := jobKey{ev.Tenant, ev.BatchID, ev.JobID}
				if outcome[k] == nil {
					outcome[k] = r
				}
			}
		}
		if !isAggregatorInput(r) || rulebook.BatchWide(ev) {
			continue
		}
		tenant, batch, job := rulebook.JobOf(ev)
		k := jobKey{tenant, batch, job}
		if _, ok := ev.Payload.(*events.JobCancelRequested); ok {
			if c.byJob[k] == nil {
				c.byJob[k] = &cancelPlace{cancel: r}
				c.byCancel[r] = c.byJob[k]
			}
			continue
		}
		inputs[k] = append(inputs[k], r)
	}
	for k, p := range c.byJob {
		out := outcome[k]
		switch {
		case out == nil:
			// No outcome recorded (the batch is still running): as stored.
		case out.Event.CausationID == p.cancel.Event.ID:
			var last *Recorded
			for _, in := range inputs[k] {
				if caused[in.Event.ID] {
					last = in
				}
			}
			p.first, p.anchor = last == nil, last
		default:
			for _, in := range inputs[k] {
				if in.Event.ID == out.Event.CausationID && in.Seq > p.cancel.Seq {
					p.anchor = in
				}
			}
		}
	}
	return c
}

// isOutcome reports whether ev announces a job's final outcome.
func isOutcome(ev events.Event) bool {
	switch p := ev.Payload.(type) {
	case *events.JobBlocked:
		return true
	case *events.IterationDecided:
		return p.Final
	}
	return false
}

// place returns the cancel of r's job, if r is one of that job's other inputs.
func (c *cancels) place(r *Recorded) *cancelPlace {
	if len(c.byJob) == 0 || r.History || isCancel(r) || !isAggregatorInput(r) || rulebook.BatchWide(r.Event) {
		return nil
	}
	tenant, batch, job := rulebook.JobOf(r.Event)
	p := c.byJob[jobKey{tenant, batch, job}]
	if p == nil || c.applied[p.cancel] {
		return nil
	}
	return p
}

// before returns the cancel to apply before r: the job's cancel overtook r.
func (c *cancels) before(r *Recorded) *Recorded {
	if p := c.place(r); p != nil && p.first {
		c.applied[p.cancel] = true
		return p.cancel
	}
	return nil
}

// after returns the cancel to apply right after r.
func (c *cancels) after(r *Recorded) *Recorded {
	if p := c.place(r); p != nil && p.anchor == r {
		c.applied[p.cancel] = true
		return p.cancel
	}
	return nil
}

// held reports whether r is a cancel applied elsewhere: already, or after an input the
// stream holds later.
func (c *cancels) held(r *Recorded) bool {
	if _, ok := r.Event.Payload.(*events.JobCancelRequested); !ok || r.History {
		return false
	}
	if c.applied[r] {
		return true
	}
	p := c.byCancel[r]
	if p == nil {
		return false
	}
	if p.anchor != nil {
		return true // applied right after its anchor, which the stream holds later
	}
	c.applied[r] = true
	return false
}
