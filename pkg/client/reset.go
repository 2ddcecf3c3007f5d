package client

import (
	"context"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
)

// ResetView asks the aggregator to start a new loop of the rubric view a job of a batch
// names (the way out of a spent budget): it reads which loop the view is in and publishes
// a view.reset of that loop, so a reset that crosses another (a second click, a changed
// spec) changes nothing. It returns the loop it asked to reset. The reset is an event on
// the stream, so `tribunal audit` replays it like every other decision's input.
func ResetView(ctx context.Context, b bus.Buckets, pub Publisher, tenant, batchID, job, by, reason string) (int, error) {
	rec, err := FindJob(ctx, b, tenant, batchID, job)
	if err != nil {
		return 0, err
	}
	lk, ok := kinds.Looping(rec.Spec.Kind)
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
	e := ResetEvent(tenant, batchID, &events.ViewReset{ACID: job, Loop: v.Generation, By: by, Reason: reason})
	msgs, err := bus.Messages(e)
	if err != nil {
		return 0, err
	}
	if err := pub.Publish("", msgs...); err != nil {
		return 0, fmt.Errorf("publish the reset of %s: %w", key, err)
	}
	return v.Generation, nil
}
