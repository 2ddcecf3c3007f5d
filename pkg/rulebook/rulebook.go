// Package rulebook holds every decision the aggregator makes, as pure functions: given a
// job's record and one event, Apply returns the new record and the events to publish;
// given a batch's final jobs, Complete returns its completion and manifests. Nothing here
// does I/O. The aggregator service runs these functions under compare-and-set; `tribunal
// audit` and `tribunal rejudge` run the very same functions in memory over replayed
// events, so an audit checks the rules that decided, not a copy of them.
//
// What differs between judge kinds is not here: Apply hands each kind's events to the
// kind's Decide (pkg/kind/<name>, found in the registry pkg/kinds).
package rulebook

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/argus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/views"
)

// ErrRefused marks an input the rules will never apply: it contradicts where it came from
// or what its job is. Retrying cannot change that, so callers drop it and count it.
var ErrRefused = errors.New("input refused")

// Input is one event the aggregator consumes.
type Input struct {
	Event events.Event
	// Link is the event's link of a job's digest chain: "<event id>:<sha256 of its wire
	// bytes>". Empty when the bytes are not known (nothing is chained then).
	Link string
	// Subject is the subject the event was published on (for a dead letter, the subject
	// it was published on before a service gave up on it). The rules act on an event only
	// when its subject belongs to the tenant and type its envelope names.
	Subject string
	// DeadLetter, when set, says a service gave up on the event: its job is blocked with
	// the reason, so no AC keeps its batch open forever.
	DeadLetter *DeadLetter
}

// DeadLetter is why a service gave up on an event.
type DeadLetter struct {
	Service string
	Reason  string
}

// State is what the rules read for one input, loaded by the caller.
type State struct {
	// Job is the record of the input's job (JobOf); nil when it is not recorded.
	Job *records.Job
	// View is a looping job's view (kind.Looping.ViewKey); a zero record for a view
	// never seen before.
	View *views.Record
	// Rubric is a looping job's rubric (kind.Looping.LoadRubric).
	Rubric *argus.Rubric
	// Spotcheck is the job holding the batch's spot-check, "" for none yet.
	Spotcheck string
	// Now is the time the rules stamp (decisions, sign-offs) when the input carries none.
	// An input's own envelope time is used first, so a replay stamps exactly what the
	// aggregator stamped.
	Now time.Time
}

// Result is what the rules decided for one input.
type Result struct {
	// Job is the record to store, nil when it stays as it is.
	Job *records.Job
	// Created says Job is new: store it only if no record exists yet.
	Created bool
	// Batch is the header a new job's batch starts with, stored unless it exists.
	Batch *records.Batch
	// View is a looping job's view to store, nil when it stays as it is.
	View *views.Record
	// Publish are the events to publish, in order.
	Publish []events.Event
	// Done says the job is final: its batch's completion must count it. A redelivered
	// input of a final job says so again, so a count lost in a crash is made up.
	Done bool
	// Decided is the decision this input made, for metrics (nil when it made none).
	Decided *events.IterationDecided
	// ClaimSpotcheck asks the caller to claim the batch's spot-check for the job and
	// apply the input again with State.Spotcheck set.
	ClaimSpotcheck bool
	// NotRecorded says the input's job is not recorded yet; it is retried (or, replaying,
	// held back) until its submission is.
	NotRecorded bool
}

// JobOf names the job an input acts on.
func JobOf(ev events.Event) (tenant, batch, job string) {
	if p, ok := ev.Payload.(*events.SpotcheckRecorded); ok {
		return ev.Tenant, ev.BatchID, p.ACID
	}
	return ev.Tenant, ev.BatchID, ev.JobID
}

// CheckOrigin refuses an event whose subject does not belong to the tenant and type its
// envelope names: a team allowed on its own subjects must not act for another team by
// writing another tenant into an envelope.
func CheckOrigin(in Input) error {
	if in.Subject == "" {
		return nil
	}
	tenant, typ, err := events.ParseSubject(in.Subject)
	if err != nil {
		return fmt.Errorf("%w: subject %q: %v", ErrRefused, in.Subject, err)
	}
	if tenant != in.Event.Tenant || typ != in.Event.Type {
		return fmt.Errorf("%w: a %s of tenant %q arrived on %s", ErrRefused, in.Event.Type, in.Event.Tenant, in.Subject)
	}
	return nil
}

// Apply applies one input to its job. It never changes st; the caller stores what the
// result says, by compare-and-set, and publishes Publish only after storing.
func Apply(st State, in Input) (Result, error) {
	ev := in.Event
	if !ev.Time.IsZero() {
		st.Now = ev.Time.UTC()
	}
	if err := CheckOrigin(in); err != nil {
		return Result{}, err
	}
	if ev.Rejudge != "" {
		// A rejudge's verdicts stand next to the original ones in the stream for the
		// rejudging client to read; they never change a decision.
		return Result{}, nil
	}
	if p, ok := ev.Payload.(*events.JobSubmitted); ok && (st.Job == nil || in.DeadLetter == nil) {
		return submitted(st, in, p)
	}
	if st.Job == nil {
		return Result{NotRecorded: true}, nil
	}
	k, err := kinds.Lookup(st.Job.Spec.Kind)
	if err != nil {
		return Result{}, fmt.Errorf("job %s: %w", st.Job.Key(), err)
	}
	if in.DeadLetter != nil {
		dl := in.DeadLetter
		return decide(st, in, func(s *kind.Step) error {
			j := s.Job
			j.Status, j.BlockStage = events.StatusBlocked, dl.Service
			j.BlockReason = fmt.Sprintf("%s gave up on %s: %s", dl.Service, ev.Type, dl.Reason)
			k.Blocked(j)
			return nil
		})
	}
	if p, ok := ev.Payload.(*events.GatesFailed); ok {
		if _, looping := k.(kind.Looping); !looping || p.Blocked != "" {
			return decide(st, in, func(s *kind.Step) error {
				j := s.Job
				j.Status, j.BlockStage = events.StatusBlocked, "gate"
				if p.Blocked != "" {
					j.BlockStage, j.BlockReason = "render", p.Blocked
				} else {
					j.BlockReason = events.FailedGates(p.Gates)
				}
				k.Blocked(j)
				return nil
			})
		}
	}
	switch ev.Payload.(type) {
	case *events.GatesFailed, *events.VerdictEmitted, *events.RenderUnchanged, *events.SpotcheckRecorded:
		return decide(st, in, k.Decide)
	}
	return Result{}, fmt.Errorf("%w: the aggregator takes no %s", ErrRefused, ev.Type)
}

// submitted records a job: the first job.submitted creates its record and asks for its
// first render (so no later stage can overtake the record); a repeated one changes
// nothing and asks again under the same id, which the stream drops as a duplicate. A
// dead-lettered submission is recorded blocked.
func submitted(st State, in Input, p *events.JobSubmitted) (Result, error) {
	ev := in.Event
	if p.Spec.ACID != ev.JobID {
		return Result{}, fmt.Errorf("%w: job.submitted %s: spec.ac_id %q differs from envelope job %q", ErrRefused, ev.ID, p.Spec.ACID, ev.JobID)
	}
	k, err := kinds.Lookup(p.Spec.Kind)
	if err != nil {
		return Result{}, fmt.Errorf("%w: job.submitted %s: %v", ErrRefused, ev.ID, err)
	}
	render := events.New(&events.RenderRequested{Spec: p.Spec}, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)
	if st.Job != nil {
		if st.Job.Status != events.StatusPending || st.Job.Attempt > 0 {
			return Result{}, nil
		}
		// Recorded before a crash that lost the render request: ask again (the stream
		// drops the copy if the first one was published).
		return Result{Publish: []events.Event{render}}, nil
	}
	j := &records.Job{
		Tenant: ev.Tenant, Batch: ev.BatchID, ACID: p.Spec.ACID, Index: p.Index, BatchSize: p.BatchSize,
		BatchSource: p.BatchSource, Spec: p.Spec, Iteration: ev.Iteration, CorrelationID: ev.CorrelationID,
		SubmittedAt: ev.Time, Status: events.StatusPending,
	}
	if in.Link != "" {
		j.Inputs = []string{in.Link}
	}
	res := Result{Job: j, Created: true, Batch: &records.Batch{Tenant: ev.Tenant, Batch: ev.BatchID, Size: p.BatchSize, Source: p.BatchSource, CreatedAt: st.Now}}
	if in.DeadLetter != nil {
		// Recorded only to be blocked: the service that gave up on it said why.
		dl := in.DeadLetter
		j.Status, j.BlockStage = events.StatusBlocked, dl.Service
		j.BlockReason = fmt.Sprintf("%s gave up on %s: %s", dl.Service, ev.Type, dl.Reason)
		k.Blocked(j)
		j.DecidedBy, j.DecidedAt = ev.ID, st.Now
		res.Done, res.Publish = true, Outputs(j, &ev.Envelope)
		return res, nil
	}
	res.Publish = []events.Event{render}
	return res, nil
}

// decide runs apply on a copy of a pending job: once it is final it keeps its first
// outcome, and a redelivered input re-announces that outcome under the same ids. A redrive
// is the one exception: a blocked job (Redrivable) takes an input of a higher attempt,
// which resets its outcome; from then on inputs of lower attempts are stale.
func decide(st State, in Input, apply func(*kind.Step) error) (Result, error) {
	j, ev := st.Job, in.Event
	if ev.Attempt < j.Attempt {
		return Result{}, nil
	}
	redrive := ev.Attempt > j.Attempt
	if j.Final() && !(redrive && Redrivable(j)) {
		if redrive {
			// A higher attempt for a job it does not concern: nothing to decide, and its
			// outcome must not be announced again under new ids.
			return Result{}, nil
		}
		return Result{Done: true, Publish: Outputs(j, &ev.Envelope)}, nil
	}
	next := j.Clone()
	if redrive {
		next.Attempt, next.Status, next.BlockStage, next.BlockReason = ev.Attempt, events.StatusPending, "", ""
		next.Decided, next.Result = nil, nil
	}
	if in.Link != "" {
		// The stages the input passed through (render.requested, render.done, gates.done)
		// go into the job's chain before the input itself, so what a decision, its
		// manifest and its sign-off rest on includes what the judge saw.
		next.Inputs = appendChain(next.Inputs, ev.Chain)
	}
	s := &kind.Step{Event: ev, Link: in.Link, Now: st.Now, Job: next, Rubric: st.Rubric, Spotcheck: st.Spotcheck}
	if st.View != nil {
		v := st.View.Clone()
		s.View = &v
	}
	if err := apply(s); err != nil {
		return Result{}, fmt.Errorf("job %s: %s %s: %w", j.Key(), ev.Type, ev.ID, err)
	}
	if s.ClaimSpotcheck {
		return Result{ClaimSpotcheck: true}, nil
	}
	if s.Replayed {
		return Result{Publish: s.Publish}, nil
	}
	if in.Link != "" {
		next.Inputs = append(next.Inputs, in.Link)
	}
	res := Result{Job: next}
	if s.ViewChanged {
		res.View = s.View
	}
	for _, e := range s.Publish {
		if d, ok := e.Payload.(*events.IterationDecided); ok {
			res.Decided = d
		}
	}
	if next.Final() {
		next.DecidedBy, next.DecidedAt = ev.ID, st.Now
		res.Done, res.Decided = true, next.Decided
		res.Publish = append(Outputs(next, &ev.Envelope), s.Publish...)
		return res, nil
	}
	res.Publish = s.Publish
	return res, nil
}

// appendChain appends the links of chain that inputs does not hold yet: several
// verdicts of one gating share its upstream links, which are chained once.
func appendChain(inputs, chain []string) []string {
	for _, l := range chain {
		if !slices.Contains(inputs, l) {
			inputs = append(inputs, l)
		}
	}
	return inputs
}

// Outputs are the events a final job record stands for: job.blocked, or its decision.
func Outputs(j *records.Job, cause *events.Envelope) []events.Event {
	var p events.Payload
	switch {
	case j.Status == events.StatusBlocked:
		p = &events.JobBlocked{Kind: j.Spec.Kind, ACID: j.ACID, Stage: j.BlockStage, Reason: j.BlockReason}
	case j.Decided != nil:
		d := *j.Decided
		p = &d
	default:
		return nil
	}
	// A looping view may have announced a pending decision at this iteration already (a
	// confirmation); its final outcome needs an id of its own or it would be dropped as a
	// duplicate of that one.
	step := ""
	if _, looping := kinds.Looping(j.Spec.Kind); looping {
		step = "final"
	}
	e := events.New(p, j.Tenant, j.Batch, j.ACID, j.Iteration, step, cause)
	e.CorrelationID = j.CorrelationID
	return []events.Event{e}
}

// Redrivable reports whether `tribunal redrive` may send a job through again: a job that
// ended blocked (a provider outage, a storage failure given up on), outside a loop (a
// looping view continues with its next run instead).
func Redrivable(j *records.Job) bool {
	if j.Status != events.StatusBlocked {
		return false
	}
	_, looping := kinds.Looping(j.Spec.Kind)
	return !looping
}

// Outcome classifies a final job for the batch's exit code, whatever its kind.
func Outcome(j *records.Job) kind.Outcome {
	switch j.Status {
	case events.StatusBlocked:
		return kind.OutcomeBlocked
	case events.StatusSchemaViolation, events.StatusPending, events.StatusAwaitingSpotcheck, "":
		return kind.OutcomeSchemaViolation
	}
	k, err := kinds.Lookup(j.Spec.Kind)
	if err != nil {
		return kind.OutcomeSchemaViolation
	}
	return k.Outcome(j)
}
