package client

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// Redrive sends a completed batch's blocked jobs (a provider that was down, a storage
// outage given up on) through the pipeline again as a new attempt. Their events get ids
// of their own, the jobs' new outcomes replace the blocked ones, and the batch completes
// again with new manifests. Jobs with another outcome are left alone. It returns the
// attempt and the jobs sent; no blocked job means attempt 0.
func Redrive(ctx context.Context, b bus.Buckets, pub Publisher, tenant, batchID string) (int, []string, error) {
	store := records.New(b)
	h, _, err := store.Header(ctx, tenant, batchID)
	if err != nil {
		return 0, nil, err
	}
	if h == nil {
		return 0, nil, fmt.Errorf("batch %s/%s: not found", tenant, batchID)
	}
	if h.Completion == nil {
		return 0, nil, fmt.Errorf("batch %s/%s is still running", tenant, batchID)
	}
	recs, err := store.LoadJobs(ctx, tenant, batchID)
	if err != nil {
		return 0, nil, err
	}
	var jobs []*records.Job
	var ids []string
	for _, r := range recs {
		if rulebook.Redrivable(r) {
			jobs = append(jobs, r)
			ids = append(ids, r.ACID)
		}
	}
	if len(jobs) == 0 {
		return 0, nil, nil
	}
	attempt := h.Completion.Attempt + 1
	if h.Redrive != nil && h.Redrive.Attempt >= attempt {
		attempt = h.Redrive.Attempt + 1
	}
	if err := store.StartRedrive(ctx, tenant, batchID, attempt, ids); err != nil {
		return 0, nil, err
	}
	var msgs []*message.Message
	for _, r := range jobs {
		e := events.NewAttempt(&events.RenderRequested{Spec: r.Spec}, tenant, batchID, r.ACID, r.Iteration, "", attempt, nil)
		m, err := bus.Messages(e)
		if err != nil {
			return 0, nil, fmt.Errorf("job %s: %w", r.ACID, err)
		}
		msgs = append(msgs, m...)
	}
	if h := bus.FormatRedriveJobs(ids); h != "" {
		// The audit needs the attempt's jobs at its first request (bus.MetaRedriveJobs).
		msgs[0].Metadata.Set(bus.MetaRedriveJobs, h)
	}
	if err := pub.Publish("", msgs...); err != nil {
		return 0, nil, fmt.Errorf("redrive %s/%s: %w", tenant, batchID, err)
	}
	return attempt, ids, nil
}

// WatchAttempt waits until the batch has completed the given redrive attempt, riding
// out reads that fail while NATS is briefly unreachable (see Watch).
func WatchAttempt(ctx context.Context, b bus.Buckets, tenant, batchID string, attempt int, interval time.Duration) (*records.Completion, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	store := records.New(b)
	for {
		h, _, err := store.Header(ctx, tenant, batchID)
		if err != nil && !bus.IsTransient(err) {
			return nil, err
		}
		if h != nil && h.Completion != nil && h.Completion.Attempt >= attempt {
			return h.Completion, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
