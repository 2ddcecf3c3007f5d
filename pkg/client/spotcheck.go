package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rubricstages "github.com/tribunal-dev/tribunal/pkg/kind/rubric/stages"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Spotcheck records a person's HE-2 decision on a sign-off that waits for one: approved,
// or the dimension the judge got wrong (which makes the feature DONE_WITH_CONCERNS).
func Spotcheck(pub Publisher, tenant, batchID, job string, approved bool, dimension, by string) error {
	if !approved && dimension == "" {
		return fmt.Errorf("a rejected spot-check names the dimension the judge got wrong")
	}
	e := SpotcheckEvent(tenant, batchID, &events.SpotcheckRecorded{ACID: job, Approved: approved, Dimension: dimension, By: by})
	msgs, err := bus.Messages(e)
	if err != nil {
		return err
	}
	return pub.Publish("", msgs...)
}

// AwaitingSpotcheck lists the jobs of a batch whose sign-off waits for a person.
func AwaitingSpotcheck(ctx context.Context, b bus.Buckets, tenant, batchID string) ([]*records.Job, error) {
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
	lk, ok := kinds.Looping(rec.Spec.Kind)
	if !ok || lk.StateKey(tenant, rec.Spec) == "" {
		return nil, fmt.Errorf("job %s is not a rubric view", rec.ACID)
	}
	r, err := rubricstages.LoadRubric(ctx, store, tenant, rec.Spec)
	if err != nil {
		return nil, fmt.Errorf("the rubric of %s: %w", rec.ACID, err)
	}
	return r, nil
}

// FindJob returns one job record of a batch.
func FindJob(ctx context.Context, b bus.Buckets, tenant, batchID, job string) (*records.Job, error) {
	r, _, err := records.New(b).Job(ctx, tenant, batchID, job)
	if errors.Is(err, records.ErrNotRecorded) {
		return nil, fmt.Errorf("batch %s has no job %s", batchID, job)
	}
	return r, err
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
