package client

import (
	"context"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Spotcheck records a person's HE-2 decision on a sign-off that waits for one: approved,
// or the dimension the judge got wrong (which makes the feature DONE_WITH_CONCERNS).
func Spotcheck(pub Publisher, tenant, batchID, job string, approved bool, dimension, by string) error {
	if !approved && dimension == "" {
		return fmt.Errorf("a rejected spot-check names the dimension the judge got wrong")
	}
	step := "approve"
	if !approved {
		step = "reject-" + dimension
	}
	e := events.New(&events.SpotcheckRecorded{ACID: job, Approved: approved, Dimension: dimension, By: by}, tenant, batchID, job, 0, step, nil)
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
