package rulebook

import (
	"encoding/json"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
)

// RefusedReview: a review.recorded the rules will not apply (a job with no verdict to
// review, an answer outside the kind's contract, a kind people cannot review).
const RefusedReview = "review"

// reviewed applies a person's review to a judged job: the job keeps the judge's verdict
// and gains the person's (records.Job.Reviews, one per reviewer, and per case for a kind
// reviewed per case: a second answer of the same person replaces the first and counts the
// change). When the batch lets people
// decide (events.ReviewSpec.Decides), the kind makes the person's answer the outcome and
// the new decision is published, caused by the review, so the audit re-derives it, and
// the runner folds a batch that completed already again (Result.Revise).
//
// A review is a person's input, so a mistake in it is refused rather than recorded as a
// schema violation: a typo must not change a verdict, and a refused answer can be given
// again. A review the aggregator gave up on is not applied late from dead letters.
func reviewed(st State, in Input, k kind.Kind, p *events.ReviewRecorded) (Result, error) {
	j, ev := st.Job, in.Event
	if in.DeadLetter != nil {
		return Result{}, refuse(RefusedReview, "review.recorded %s: %s gave up on it (%s); it is not applied late", ev.ID, in.DeadLetter.Service, in.DeadLetter.Reason)
	}
	rk, whole := k.(kind.Reviewing)
	ck, perCase := k.(kind.CaseReviewing)
	switch {
	case perCase && p.Case == "":
		return Result{}, refuse(RefusedReview, "review.recorded %s: job %s is a %s job, reviewed per case: the review names no case (field case)", ev.ID, j.Key(), j.Spec.Kind)
	case whole && p.Case != "":
		return Result{}, refuse(RefusedReview, "review.recorded %s: case %q: job %s is a %s job, reviewed whole, not per case", ev.ID, p.Case, j.Key(), j.Spec.Kind)
	case !whole && !perCase:
		return Result{}, refuse(RefusedReview, "review.recorded %s: job %s is a %s job, which people cannot review", ev.ID, j.Key(), j.Spec.Kind)
	}
	if p.Kind != j.Spec.Kind {
		return Result{}, refuse(RefusedReview, "review.recorded %s: a %s answer for job %s, a %s job", ev.ID, p.Kind, j.Key(), j.Spec.Kind)
	}
	if !j.Final() || ev.Iteration != j.Iteration || ev.Attempt != j.Attempt {
		return Result{}, refuse(RefusedReview, "review.recorded %s: job %s has no verdict of iteration %d attempt %d to review", ev.ID, j.Key(), ev.Iteration, ev.Attempt)
	}
	decides := j.Spec.Review != nil && j.Spec.Review.Decides
	if why := kind.RefuseDecides(k); decides && why != "" {
		// The batch planner blocks such an AC and its job spec is refused on the wire;
		// a record that says so anyway gets no review applied, deciding or not.
		return Result{}, refuse(RefusedReview, "review.recorded %s: job %s is a %s job: %s", ev.ID, j.Key(), j.Spec.Kind, why)
	}
	mine, first := -1, -1
	for i, r := range j.Reviews {
		if r.Event == ev.ID {
			// The same answer again: nothing changes, but a completion it decided after
			// the batch completed may not have been folded again yet (a crash between
			// the two writes), which the runner makes up, and the decision it made may
			// not have reached the stream (stored, then the publish failed): while it is
			// still the job's decision it is announced again under the same id.
			res := Result{Revise: r.Decides}
			if r.Decides && j.DecidedBy == ev.ID && j.Decided != nil {
				res.Publish = []events.Event{reviewDecision(j, j.Decided, ev)}
			}
			return res, nil
		}
		if r.Case != p.Case {
			continue
		}
		if first < 0 {
			first = i
		}
		if r.By == p.By {
			mine = i
		}
	}
	// The judge's verdict as it stood before any review decided: once a person decided,
	// the job's own decision is theirs.
	var (
		judge, person review.Verdict
		model         string
		ok            bool
		err           error
	)
	if perCase {
		judge, model, ok = ck.CaseJudgeVerdict(j, p.Case)
	} else {
		judge, model, ok = rk.JudgeVerdict(j)
	}
	if first >= 0 {
		judge, model, ok = j.Reviews[first].Judge, j.Reviews[first].Model, true
	}
	if !ok {
		if perCase {
			return Result{}, refuse(RefusedReview, "review.recorded %s: job %s: case %q: no judge verdict to review (field case; cases with one: %v)", ev.ID, j.Key(), p.Case, ck.ReviewCases(j))
		}
		return Result{}, refuse(RefusedReview, "review.recorded %s: job %s has no judge verdict to review (%s)", ev.ID, j.Key(), j.Status)
	}
	if perCase {
		person, err = ck.CaseReviewAnswer(j, p.Case, []byte(p.Answer))
	} else {
		person, err = rk.ReviewAnswer(j, []byte(p.Answer))
	}
	if err != nil {
		return Result{}, refuse(RefusedReview, "review.recorded %s: job %s: %v", ev.ID, j.Key(), err)
	}
	r := records.Review{By: p.By, At: st.Now, Via: p.Via, Event: ev.ID, Link: in.Link, Iteration: ev.Iteration,
		Answer: json.RawMessage(p.Answer), Person: person, Judge: judge, Model: model,
		Case: p.Case, Decides: decides}
	next := j.Clone()
	if mine >= 0 {
		r.Changes, r.Replaced = j.Reviews[mine].Changes+1, j.Reviews[mine].Event
		r.Seqs = append(r.Seqs, j.Reviews[mine].Seqs...)
	}
	if in.Seq != 0 {
		r.Seqs = append(r.Seqs, in.Seq)
	}
	if mine >= 0 {
		next.Reviews[mine] = r
	} else {
		next.Reviews = append(next.Reviews, r)
	}
	if in.Link != "" {
		next.AddInput(in.Link, in.Seq)
	}
	res := Result{Job: next}
	if !r.Decides {
		return res, nil
	}
	var d *events.IterationDecided
	if perCase {
		d, err = ck.DecideByCaseReview(next, p.Case, []byte(p.Answer), p.By, ev)
	} else {
		d, err = rk.DecideByReview(next, []byte(p.Answer), p.By, ev)
	}
	if err != nil {
		return Result{}, fmt.Errorf("job %s: review.recorded %s: %w", j.Key(), ev.ID, err)
	}
	next.Decided, next.DecidedBy, next.DecidedAt = d, ev.ID, st.Now
	res.Publish, res.Decided, res.Revise = []events.Event{reviewDecision(j, d, ev)}, d, true
	return res, nil
}

// reviewDecision is the decision a person's review made of job j, caused by the review.
func reviewDecision(j *records.Job, d *events.IterationDecided, review events.Event) events.Event {
	p := *d
	out := events.New(&p, j.Tenant, j.Batch, j.ACID, j.Iteration, events.ReviewedStep(review.ID), &review.Envelope)
	out.CorrelationID = j.CorrelationID
	return out
}
