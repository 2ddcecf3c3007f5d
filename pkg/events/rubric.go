package events

import (
	"fmt"
	"strconv"
	"strings"
)

// Rubric modes: headless runs to sign-off without waiting for a person, interactive
// holds the first sign-off of a run for a human spot-check, report-only judges once and
// decides nothing.
const (
	ModeHeadless    = "headless"
	ModeInteractive = "interactive"
	ModeReportOnly  = "report-only"
)

// RenderUnchanged reports a confirmation render that passed its gates and did not
// change: it confirms the previous pass without a judge call.
type RenderUnchanged struct {
	Kind  Kind   `msgpack:"kind"`
	ACID  string `msgpack:"ac_id"`
	Gates []Gate `msgpack:"gates"`
	// Render is the confirming render.
	Render Blob `msgpack:"render"`
	// GateResult is the confirming render's gate-result.json in blob storage.
	GateResult *Blob `msgpack:"gate_result,omitempty"`
}

// EventType implements Payload.
func (*RenderUnchanged) EventType() Type { return TypeRenderUnchanged }

// Validate implements Payload.
func (p *RenderUnchanged) Validate() error {
	if p.ACID == "" {
		return missing("ac_id")
	}
	if p.GateResult != nil {
		if err := p.GateResult.validate("gate_result"); err != nil {
			return err
		}
	}
	return p.Render.validate("render")
}

// SpotcheckRecorded is a person's HE-2 spot-check of a sign-off: approved, or the
// dimension the judge got wrong.
type SpotcheckRecorded struct {
	ACID string `msgpack:"ac_id"`
	// Approved, or Dimension names what the judge got wrong.
	Approved  bool   `msgpack:"approved"`
	Dimension string `msgpack:"dimension,omitempty"`
	By        string `msgpack:"by,omitempty"`
}

// EventType implements Payload.
func (*SpotcheckRecorded) EventType() Type { return TypeSpotcheckRecorded }

// Validate implements Payload.
func (p *SpotcheckRecorded) Validate() error {
	if p.ACID == "" {
		return missing("ac_id")
	}
	if !p.Approved && p.Dimension == "" {
		return missing("dimension")
	}
	// The dimension becomes the sign-off's human_spotcheck value, where "pending" and
	// "approved" are states, not dimensions; the decision words and padded text are a
	// person's answer taken for a dimension. The rubric's own list is checked by the
	// publisher (argus.Rubric.CheckSpotcheck), which has the rubric.
	switch d := p.Dimension; {
	case p.Approved && d != "":
		return invalid("dimension", "an approved spot-check names no dimension")
	case strings.TrimSpace(d) != d:
		return invalid("dimension", "surrounding white space")
	case spotcheckWords[strings.ToLower(d)]:
		return invalid("dimension", fmt.Sprintf("%q is a spot-check answer, not a rubric dimension", d))
	}
	return nil
}

// spotcheckWords are answers and states that are never rubric dimensions.
var spotcheckWords = map[string]bool{"pending": true, "approved": true, "approve": true, "reject": true, "rejected": true,
	"y": true, "yes": true, "n": true, "no": true}

// ViewReset is an operator's reset of a rubric view's loop (the way out of a spent
// budget): the view's next step starts a new loop with no iterations, attempts, frozen
// dimensions, sign-off or snapshot baseline. It names a job of the view (results show
// one); the view is the one that job's spec names.
type ViewReset struct {
	ACID string `msgpack:"ac_id"`
	// Loop is the loop being reset, as the view numbered it when the operator looked: a
	// reset of a loop that was replaced since (reset already, or a changed spec) changes
	// nothing, so a repeated or late reset cannot throw away a loop nobody looked at.
	Loop   int    `msgpack:"loop"`
	By     string `msgpack:"by,omitempty"`
	Reason string `msgpack:"reason,omitempty"`
}

// EventType implements Payload.
func (*ViewReset) EventType() Type { return TypeViewReset }

// Validate implements Payload.
func (p *ViewReset) Validate() error {
	if p.ACID == "" {
		return missing("ac_id")
	}
	if p.Loop < 0 {
		return invalid("loop", "must be 0 or more")
	}
	if len(p.Reason) > maxResetReason {
		return invalid("reason", fmt.Sprintf("at most %d bytes", maxResetReason))
	}
	return nil
}

// maxResetReason bounds a reset's reason: it is shown in the console and results.
const maxResetReason = 2000

// SpotcheckEvent is the event of a spot-check: its id step is the decision, so a
// repeated click is dropped as a duplicate and a changed mind is a new event.
func SpotcheckEvent(tenant, batchID string, p *SpotcheckRecorded) Event {
	step := "approve"
	if !p.Approved {
		step = "reject-" + p.Dimension
	}
	return New(p, tenant, batchID, p.ACID, 0, step, nil)
}

// ResetEvent is the event of a view reset, one per loop (ResetStep).
func ResetEvent(tenant, batchID string, p *ViewReset) Event {
	return New(p, tenant, batchID, p.ACID, 0, ResetStep(p.Loop), nil)
}

// ResetStep is the id step of a reset of loop n: one reset per loop and job, so a
// repeated click is dropped as a duplicate.
func ResetStep(loop int) string { return "reset-" + strconv.Itoa(loop) }
