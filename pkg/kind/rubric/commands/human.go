package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// The human steps of a rubric view (seed 004's HE-2 spot-check, and an operator's reset
// of a spent loop), as `tribunal spotcheck`, `tribunal view-reset`, the all-in-one run's
// prompt and the console take them.

// Spotcheck records a person's HE-2 decision on a sign-off that waits for one: approved,
// or the dimension the judge got wrong (which makes the feature DONE_WITH_CONCERNS).
func Spotcheck(pub stage.Publisher, tenant, batchID, job string, approved bool, dimension, by string) error {
	if !approved && dimension == "" {
		return fmt.Errorf("a rejected spot-check names the dimension the judge got wrong")
	}
	e := events.SpotcheckEvent(tenant, batchID, &events.SpotcheckRecorded{ACID: job, Approved: approved, Dimension: dimension, By: by})
	msgs, err := bus.Messages(e)
	if err != nil {
		return err
	}
	return pub.Publish("", msgs...)
}

// AwaitingSpotcheck lists the jobs of a batch whose sign-off waits for a person.
func AwaitingSpotcheck(ctx context.Context, b kv.Buckets, tenant, batchID string) ([]*records.Job, error) {
	recs, err := records.New(b).LoadJobs(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	var out []*records.Job
	for _, r := range recs {
		if r.Status == events.StatusAwaitingSpotcheck {
			out = append(out, r)
		}
	}
	return out, nil
}

// ViewRubric reads the rubric a rubric view is judged with (the one its job carries), so a
// spot-check can be checked against its dimensions (argus.Rubric.CheckSpotcheck).
func ViewRubric(ctx context.Context, store blob.Store, tenant string, rec *records.Job) (*argus.Rubric, error) {
	lk, ok := kind.LoopingOf(rec.Spec.Kind)
	if !ok || lk.StateKey(tenant, rec.Spec) == "" {
		return nil, fmt.Errorf("job %s is not a rubric view", rec.ACID)
	}
	r, err := loadRubric(ctx, store, tenant, rec.Spec)
	if err != nil {
		return nil, fmt.Errorf("the rubric of %s: %w", rec.ACID, err)
	}
	return r, nil
}

// loadRubric reads the rubric a view's job carries; nil for a blocked view.
func loadRubric(ctx context.Context, store blob.Store, tenant string, spec events.JobSpec) (*argus.Rubric, error) {
	rs := rubricwire.SpecOf(spec.KindPart)
	if rs == nil || rs.Blocked != "" {
		return nil, nil
	}
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: rs.Rubric.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read rubric: %w", err)
	}
	return argus.ParseRubric(data)
}

// SpotcheckAnswer reads what a person typed at the HE-2 prompt: y or yes approves;
// otherwise the answer must name one of the rubric's dimensions (the one the judge got
// wrong). Anything else is an error saying what to type, so the prompt can ask again
// instead of recording "reject" or a typo as a dimension.
func SpotcheckAnswer(r *argus.Rubric, answer string) (approved bool, dimension string, err error) {
	answer = strings.TrimSpace(answer)
	switch strings.ToLower(answer) {
	case "y", "yes":
		return true, "", nil
	}
	if err := r.CheckSpotcheck(false, answer); err != nil {
		return false, "", fmt.Errorf("type y to approve, or the dimension the judge got wrong: %w", err)
	}
	return false, answer, nil
}

// ResetView asks the aggregator to start a new loop of the rubric view a job of a batch
// names (the way out of a spent budget): it reads which loop the view is in and publishes
// a view.reset of that loop, so a reset that crosses another (a second click, a changed
// spec) changes nothing. It returns the loop it asked to reset. The reset is an event on
// the stream, so `tribunal audit` replays it like every other decision's input.
func ResetView(ctx context.Context, b kv.Buckets, pub stage.Publisher, tenant, batchID, job, by, reason string) (int, error) {
	rec, err := records.FindJob(ctx, b, tenant, batchID, job)
	if err != nil {
		return 0, err
	}
	lk, ok := kind.LoopingOf(rec.Spec.Kind)
	key := ""
	if ok {
		key = lk.StateKey(tenant, rec.Spec)
	}
	if key == "" {
		return 0, fmt.Errorf("job %s of batch %s is not a rubric view with a loop", job, batchID)
	}
	if b.Views == nil {
		return 0, fmt.Errorf("reset %s: no views bucket", job)
	}
	v, _, err := views.Load(ctx, b.Views, key)
	if err != nil {
		return 0, err
	}
	if v.Loop.Feature == "" {
		return 0, fmt.Errorf("view %s has no loop to reset yet", key)
	}
	e := events.ResetEvent(tenant, batchID, &events.ViewReset{ACID: job, Loop: v.Generation, By: by, Reason: reason})
	msgs, err := bus.Messages(e)
	if err != nil {
		return 0, err
	}
	if err := pub.Publish("", msgs...); err != nil {
		return 0, fmt.Errorf("publish the reset of %s: %w", key, err)
	}
	return v.Generation, nil
}
