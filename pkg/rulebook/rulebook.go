// Package rulebook holds every decision the aggregator makes, as pure functions: given a
// job's record and one event, Apply returns the new record and the events to publish;
// given a batch's final jobs, Complete returns its completion and manifests. Nothing here
// does I/O. The aggregator service runs these functions under compare-and-set; `tribunal
// audit` and `tribunal rejudge` run the very same functions in memory over replayed
// events, so an audit checks the rules that decided, not a copy of them.
//
// What differs between judge kinds is not here: Apply hands each kind's events to the
// kind's Decide (pkg/kind/<name>, found in the registry pkg/registry).
package rulebook

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// ErrRefused marks an input the rules will never apply: it contradicts where it came from
// or what its job is. Retrying cannot change that, so callers drop it and count it. A
// kind's Decide refuses with the same error (kind.ErrRefused); the rules' own refusals
// are a *Refusal, whose Reason is the count's label.
var ErrRefused = kind.ErrRefused

// Reasons of a Refusal besides CheckOrigin's (events.OriginSubject, OriginTenant,
// OriginType): fixed words, fit for a metric label.
const (
	// RefusedJob: a job.submitted whose spec names another job than its envelope.
	RefusedJob = "job_mismatch"
	// RefusedKind: a job.submitted of a judge kind this build does not know.
	RefusedKind = "unknown_kind"
	// RefusedType: an event type the aggregator does not consume.
	RefusedType = "not_an_input"
)

// Refusal is an input the rules refused, and why. It matches ErrRefused.
type Refusal struct {
	// Reason is one of a fixed set of words (events.Origin*, Refused*).
	Reason string
	Err    error
}

func (r *Refusal) Error() string        { return ErrRefused.Error() + ": " + r.Err.Error() }
func (r *Refusal) Unwrap() error        { return r.Err }
func (r *Refusal) Is(target error) bool { return errors.Is(ErrRefused, target) }

func refuse(reason, format string, args ...any) error {
	return &Refusal{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// RefusalReason is err's refusal reason, "" when err is no refusal.
func RefusalReason(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

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
	// Seq is where the stream holds the event (0: not known), and ChainSeqs where it
	// holds the events of its chain (Event.Chain), in order (nil: not known). The record
	// keeps them beside the links (records.Job.Positions), for the audit of one job.
	Seq       uint64
	ChainSeqs []uint64
}

// chainSeq is where the stream holds the event of link i of the input's chain, 0 when
// not known.
func (in Input) chainSeq(i int) uint64 {
	if len(in.ChainSeqs) != len(in.Event.Chain) {
		return 0
	}
	return in.ChainSeqs[i]
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
	// KindState is a looping job's own state (kind.Looping.LoadState), loaded when the
	// rules read it (NeedsState): the kind's value, which the rules hand to its Decide.
	KindState kind.State
	// Claim is the job holding the batch's claim (kind.Looping.Claiming), "" for none
	// yet.
	Claim string
	// Holder is the record of the job holding the batch's claim when it is another job
	// than the input's (NeedsHolder): while it has no outcome, the input waits (the hold,
	// see Park).
	Holder *records.Job
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
	// KindState is a looping job's own state to store (under its kind.Looping.StateKey,
	// as it encodes itself), nil when it stays as it is.
	KindState kind.State
	// Publish are the events to publish, in order.
	Publish []events.Event
	// Done says the job is final: its batch's completion must count it. A redelivered
	// input of a final job says so again, so a count lost in a crash is made up.
	Done bool
	// Decided is the decision this input made, for metrics (nil when it made none).
	Decided *events.IterationDecided
	// WantsClaim asks the caller to claim the batch's claim for the job and apply the
	// input again with State.Claim set.
	WantsClaim bool
	// NotRecorded says the input's job is not recorded yet; it is retried (or, replaying,
	// held back) until its submission is.
	NotRecorded bool
	// Hold says the input waits for the batch's claim holder's outcome (rubric's HE-2):
	// the caller parks it on the holder's record (Park) and decides nothing else now.
	Hold bool
	// Release are inputs this job held for other jobs and now lets go (the job is
	// final): the caller applies each to its own job, after storing this result.
	Release []Input
	// Revise says a person's review decided the job's outcome: once the job is stored, a
	// batch that completed already is folded again and its completion and manifests
	// replaced (Runner). A redelivered deciding review says so again, so a revision lost
	// in a crash is made up; one that changes nothing stores nothing.
	Revise bool
}

// JobOf names the job an input acts on.
func JobOf(ev events.Event) (tenant, batch, job string) {
	switch p := ev.Payload.(type) {
	case *events.SpotcheckRecorded:
		return ev.Tenant, ev.BatchID, p.ACID
	case *events.ViewReset:
		return ev.Tenant, ev.BatchID, p.ACID
	}
	return ev.Tenant, ev.BatchID, ev.JobID
}

// NeedsState reports whether the rules read a looping job's own state (State.KindState)
// for ev: every input of a job still in its loop, and an operator's reset of the loop,
// which usually names a job whose run ended (its budget spent).
func NeedsState(j *records.Job, ev events.Event) bool {
	if _, ok := ev.Payload.(*events.ViewReset); ok {
		return true
	}
	return !j.Final()
}

// CheckOrigin refuses an event whose subject does not belong to the tenant and type its
// envelope names: a team allowed on its own subjects must not act for another team by
// writing another tenant into an envelope.
func CheckOrigin(in Input) error {
	if in.Subject == "" {
		return nil
	}
	if err := events.CheckOrigin(in.Subject, in.Event.Tenant, in.Event.Type); err != nil {
		var oe *events.OriginError
		errors.As(err, &oe)
		return &Refusal{Reason: oe.Reason, Err: err}
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
	if p, ok := ev.Payload.(*events.JobCancelRequested); ok {
		// A dead-lettered cancel still says what was asked: the job is cancelled all the same.
		return cancelled(st, in, p)
	}
	if p, ok := ev.Payload.(*events.JobSubmitted); ok && (st.Job == nil || in.DeadLetter == nil) {
		return submitted(st, in, p)
	}
	if st.Job == nil {
		return Result{NotRecorded: true}, nil
	}
	k, err := kind.Lookup(st.Job.Spec.Kind)
	if err != nil {
		return Result{}, fmt.Errorf("job %s: %w", st.Job.Key(), err)
	}
	if p, ok := ev.Payload.(*events.ViewReset); ok {
		return resetState(st, in, k, p)
	}
	if p, ok := ev.Payload.(*events.ReviewRecorded); ok {
		return reviewed(st, in, k, p)
	}
	if heldInput(&st, in, k) {
		return Result{Hold: true}, nil
	}
	if in.DeadLetter != nil {
		if err := refusedAgain(st, in, k); err != nil {
			return Result{}, err
		}
		dl := in.DeadLetter
		return decideReleasing(st, in, func(s *kind.Step) error {
			j := s.Job
			j.Status, j.BlockStage = events.StatusBlocked, dl.Service
			j.BlockReason = fmt.Sprintf("%s gave up on %s: %s", dl.Service, ev.Type, dl.Reason)
			k.Blocked(j)
			return nil
		})
	}
	if p, ok := ev.Payload.(*events.GatesFailed); ok {
		if _, looping := k.(kind.Looping); !looping || p.Blocked != "" {
			return decideReleasing(st, in, func(s *kind.Step) error {
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
		return decideReleasing(st, in, k.Decide)
	}
	return Result{}, refuse(RefusedType, "the aggregator takes no %s", ev.Type)
}

// refusedAgain is the refusal of an input the kind's rules refuse (kind.ErrRefused, e.g. a
// spot-check naming no dimension of the view's rubric), when it comes back as the dead
// letter its refusal made: it is refused again, as CheckOrigin refuses again, instead of
// blocking a job that did nothing wrong.
func refusedAgain(st State, in Input, k kind.Kind) error {
	switch in.Event.Payload.(type) {
	case *events.GatesFailed, *events.VerdictEmitted, *events.RenderUnchanged, *events.SpotcheckRecorded:
	default:
		return nil
	}
	plain := in
	plain.DeadLetter = nil
	if _, err := decide(st, plain, k.Decide); errors.Is(err, ErrRefused) {
		return err
	}
	return nil
}

// resetState applies an operator's reset of a looping job's loop (view.reset) to its
// state: its next step starts a new loop with a fresh budget (kind.Looping.Reset). The job
// it names keeps its outcome: the reset is about the runs to come. A reset the kind finds
// nothing to change for changes nothing. A reset the aggregator gave up on is not applied
// late from dead letters: the operator resets again.
func resetState(st State, in Input, k kind.Kind, p *events.ViewReset) (Result, error) {
	j, ev := st.Job, in.Event
	lk, ok := k.(kind.Looping)
	if !ok || lk.StateKey(j.Tenant, j.Spec) == "" {
		return Result{}, fmt.Errorf("%w: view.reset %s: job %s has no view with a loop", ErrRefused, ev.ID, j.Key())
	}
	if in.DeadLetter != nil {
		return Result{}, fmt.Errorf("%w: view.reset %s: %s gave up on it (%s); it is not applied late", ErrRefused, ev.ID, in.DeadLetter.Service, in.DeadLetter.Reason)
	}
	if st.KindState == nil {
		return Result{}, fmt.Errorf("job %s: the view's state was not given to the rules", j.Key())
	}
	v := st.KindState.Clone()
	if !lk.Reset(v, ev, p, st.Now) {
		return Result{}, nil
	}
	return Result{KindState: v}, nil
}

// submitted records a job: the first job.submitted creates its record and asks for its
// first render (so no later stage can overtake the record); a repeated one changes
// nothing and asks again under the same id, which the stream drops as a duplicate. A
// dead-lettered submission is recorded blocked.
func submitted(st State, in Input, p *events.JobSubmitted) (Result, error) {
	ev := in.Event
	if p.Spec.ACID != ev.JobID {
		return Result{}, refuse(RefusedJob, "job.submitted %s: spec.ac_id %q differs from envelope job %q", ev.ID, p.Spec.ACID, ev.JobID)
	}
	k, err := kind.Lookup(p.Spec.Kind)
	if err != nil {
		return Result{}, refuse(RefusedKind, "job.submitted %s: %v", ev.ID, err)
	}
	render := events.New(&events.RenderRequested{Spec: p.Spec}, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)
	if st.Job != nil {
		if st.Job.Final() && st.Job.DecidedBy == ev.ID {
			// Decided by its submission (Settling, or a dead letter): said again, so a
			// count lost in a crash is made up.
			return Result{Done: true, Publish: Announced(st.Job)}, nil
		}
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
		j.AddInput(in.Link, in.Seq)
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
	if sk, ok := k.(kind.Settling); ok && sk.Settle(j) {
		// Its outcome is known without a render (a view waiting for a reference image).
		j.DecidedBy, j.DecidedAt = ev.ID, st.Now
		res.Done, res.Publish = true, Outputs(j, &ev.Envelope)
		return res, nil
	}
	res.Publish = []events.Event{render}
	return res, nil
}

// decideReleasing is decide that also releases the inputs a job held for others once it
// is final (the HE-2 hold).
func decideReleasing(st State, in Input, apply func(*kind.Step) error) (Result, error) {
	res, err := decide(st, in, apply)
	return withRelease(res, st.Job, err)
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
		return Result{Done: true, Publish: Announced(j)}, nil
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
		appendChain(next, in)
	}
	s := &kind.Step{Event: ev, Link: in.Link, Now: st.Now, Job: next, Claim: st.Claim}
	if st.KindState != nil {
		s.State = st.KindState.Clone()
	}
	if err := apply(s); err != nil {
		return Result{}, fmt.Errorf("job %s: %s %s: %w", j.Key(), ev.Type, ev.ID, err)
	}
	if s.WantsClaim {
		return Result{WantsClaim: true}, nil
	}
	if s.Replayed {
		return Result{Publish: s.Publish}, nil
	}
	if in.Link != "" {
		next.AddInput(in.Link, in.Seq)
	}
	if v, ok := ev.Payload.(*events.VerdictEmitted); ok {
		calls := CallsOf(v)
		next.Calls = append(next.Calls, calls...)
		BudgetStop(next, calls)
	}
	res := Result{Job: next}
	if s.StateChanged {
		res.KindState = s.State
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

// appendChain appends to j the links of the input's chain that it does not hold yet:
// several verdicts of one gating share its upstream links, which are chained once.
func appendChain(j *records.Job, in Input) {
	for i, l := range in.Event.Chain {
		if !slices.Contains(j.Inputs, l) {
			j.AddInput(l, in.chainSeq(i))
		}
	}
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
	if _, looping := kind.LoopingOf(j.Spec.Kind); looping {
		step = "final"
	}
	e := events.New(p, j.Tenant, j.Batch, j.ACID, j.Iteration, step, cause)
	e.CorrelationID = j.CorrelationID
	return []events.Event{e}
}

// Announced is a final job's outcome as it was first announced, whichever later input
// asks for it again: under the same ids and naming, as its cause, the input that decided
// it (and that input's attempt). Two inputs of one job may be handled at once (a verdict
// and a cancel), the later one finding the job final; whichever publishes first is the
// copy the stream keeps, and it must say what decided.
func Announced(j *records.Job) []events.Event {
	return Outputs(j, &events.Envelope{ID: j.DecidedBy, Attempt: j.Attempt, CorrelationID: j.CorrelationID})
}

// Redrivable reports whether `tribunal redrive` may send a job through again: a job that
// ended blocked (a provider outage, a storage failure given up on), outside a loop (a
// looping view continues with its next run instead).
func Redrivable(j *records.Job) bool {
	if j.Status != events.StatusBlocked {
		return false
	}
	_, looping := kind.LoopingOf(j.Spec.Kind)
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
	k, err := kind.Lookup(j.Spec.Kind)
	if err != nil {
		return kind.OutcomeSchemaViolation
	}
	return k.Outcome(j)
}

// BudgetStop blocks a job one of whose calls a budget refused, with the refusal ("budget
// exhausted: ..."), whatever its kind made of the calls that were answered: the job was
// not judged as it asked to be, and a rerun under a raised budget judges it whole. It is
// a rule of its own, beside the kinds', so the aggregator and `tribunal audit` derive a
// budget stop alike from the recorded verdict, for every kind.
func BudgetStop(j *records.Job, calls []records.Call) bool {
	for _, c := range calls {
		if c.BudgetRefused == "" {
			continue
		}
		j.Status, j.BlockStage, j.BlockReason, j.Decided = events.StatusBlocked, "judge", c.BudgetRefused, nil
		if k, err := kind.Lookup(j.Spec.Kind); err == nil {
			k.Blocked(j)
		}
		return true
	}
	return false
}

// CallsOf lists the judge calls a verdict carries, whatever its kind: the verdict's kind
// lists them (kind.Calling), so the rulebook reads no kind's fields of a verdict. A kind
// that is not registered, or asks no judge, lists none.
func CallsOf(v *events.VerdictEmitted) []records.Call {
	k, err := kind.Lookup(v.Kind)
	if err != nil {
		return nil
	}
	if c, ok := k.(kind.Calling); ok {
		return c.Calls(v)
	}
	return nil
}
