package rulebook

import (
	"errors"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// The hold. A looping kind's claiming jobs (kind.Looping.Claiming) share one claim per
// batch: the first whose outcome would wait for a person claims it, and while it waits,
// every loop input of the batch's other claiming jobs (a verdict, red gates, an unchanged
// render) is parked on the holder's record (Park) instead of being applied, so none of
// them renders again, is decided or signs off. When the holder's job becomes final (the
// answer, or a cancel) the parked inputs are released (Result.Release): each is applied
// to its own job as if it arrived then, stamped no earlier than the holder's outcome.
// Jobs that do not claim never wait, and never make anyone wait.
//
// Rubric's HE-2 is the one claim there is: seed 004 pauses at the first sign-off of a run
// for a person's spot-check and does "not continue to the remaining views until the human
// responds". tribunal's views run side by side, so the pause is this rule; headless and
// report-only views do not claim.
//
// Both ends are events: the hold begins with the sign-off that claimed the claim
// (its iteration.decided says awaiting_spotcheck) and ends with the holder's final
// outcome (the spotcheck.recorded that decided it); a released input's outputs name that
// input as their cause. Whether one input arrived before or after the answer changes when
// its outputs are published, never what they say: an input applied after the holder's
// outcome is stamped no earlier than it either, so a replay in stream order re-derives
// the same events whichever way a race between the two went.

// heldInput reports whether in must wait for the batch's claim: it is a loop input of a
// claiming job that is not the one holding the claim, and the holder's job has no outcome
// yet. For an input that need not wait because the holder's outcome
// is in, it moves st.Now up to that outcome's time.
func heldInput(st *State, in Input, k kind.Kind) bool {
	j, ev := st.Job, in.Event
	lk, ok := k.(kind.Looping)
	if !ok || in.DeadLetter != nil || j.Final() || ev.Attempt != j.Attempt || !lk.Claiming(j.Spec) {
		return false
	}
	switch ev.Payload.(type) {
	case *events.GatesFailed, *events.VerdictEmitted, *events.RenderUnchanged:
	default:
		return false
	}
	h := st.Holder
	if st.Claim == "" || st.Claim == j.ACID || h == nil {
		return false
	}
	if !h.Final() {
		return true
	}
	if h.DecidedAt.After(st.Now) {
		st.Now = h.DecidedAt.UTC()
	}
	return false
}

// NeedsHolder reports whether the rules read the record of the job holding the batch's
// claim (State.Holder) for an input of j: when j is a claiming job and another job holds
// the claim.
func NeedsHolder(j *records.Job, claim string) bool {
	return j != nil && claim != "" && claim != j.ACID && !j.Final()
}

// Park holds in on the record of the job holding the batch's claim (Result.Hold). It
// returns the record to store, or nil when there is nothing to store (in is held already);
// ok is false when the holder has its outcome by now, so in is to be applied instead (the
// caller applies it again on what it reloads).
func Park(holder *records.Job, in Input) (next *records.Job, ok bool, err error) {
	if holder.Final() {
		return nil, false, nil
	}
	for _, h := range holder.Held {
		if h.ID == in.Event.ID {
			return nil, true, nil
		}
	}
	data, err := events.Encode(in.Event)
	if err != nil {
		return nil, false, fmt.Errorf("hold %s %s on job %s: %w", in.Event.Type, in.Event.ID, holder.Key(), err)
	}
	_, _, job := JobOf(in.Event)
	next = holder.Clone()
	// The input passed the origin check when it came in (Apply); held, it is not checked
	// again.
	next.Held = append(next.Held, records.HeldInput{Job: job, Event: data, Link: in.Link, ID: in.Event.ID,
		Seq: in.Seq, ChainSeqs: in.ChainSeqs})
	return next, true, nil
}

// released are the inputs a final job held for others, to be applied now, each to its
// own job. A final job releases them again whenever it is asked (a redelivered input), so
// a release a crash cut short is finished; applying one twice changes nothing.
func released(j *records.Job) ([]Input, error) {
	if j == nil || !j.Final() || len(j.Held) == 0 {
		return nil, nil
	}
	out := make([]Input, 0, len(j.Held))
	for _, h := range j.Held {
		ev, err := events.Decode(h.Event)
		if err != nil {
			return nil, fmt.Errorf("job %s: held input %s does not decode: %w", j.Key(), h.ID, err)
		}
		out = append(out, Input{Event: ev, Link: h.Link, Seq: h.Seq, ChainSeqs: h.ChainSeqs})
	}
	return out, nil
}

// withRelease adds to res what the job it stores (or, when it stores none, the job as it
// was) releases.
func withRelease(res Result, j *records.Job, err error) (Result, error) {
	if err != nil {
		return res, err
	}
	if res.Job != nil {
		j = res.Job
	}
	if res.Release, err = released(j); err != nil {
		return Result{}, err
	}
	return res, nil
}

// AfterRelease says what becomes of a released input whose rules failed with err: an input
// they refuse is dropped (skip), as the aggregator drops one that never waited; one that
// is no input of its job's kind blocks its job (again), as the dead letter the aggregator
// would have made of it does, so the holder's outcome is never held up by another job's
// input. Any other failure is the caller's to retry.
func AfterRelease(in Input, err error) (again *Input, skip bool) {
	switch {
	case errors.Is(err, ErrRefused):
		return nil, true
	case errors.Is(err, kind.ErrNotForKind):
		in.DeadLetter = &DeadLetter{Service: "aggregator", Reason: err.Error()}
		return &in, false
	}
	return nil, false
}
