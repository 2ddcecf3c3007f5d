package aggregator

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// buckets is the runner's store over the aggregator's key-value buckets and blob store
// (rulebook.Store): job records and batch headers in the records buckets, the looping
// kinds' states in the views bucket, their documents and the plan pages in blob storage.
// A record that does not decode is a permanent failure: no retry mends it.
type buckets struct{ s *Service }

var _ rulebook.Store = buckets{}

func (b buckets) Job(ctx context.Context, tenant, batch, job string) (*records.Job, uint64, error) {
	j, rev, err := b.s.records.Job(ctx, tenant, batch, job)
	switch {
	case errors.Is(err, records.ErrNotRecorded):
		return nil, 0, nil
	case errors.Is(err, records.ErrCorrupt):
		return nil, 0, bus.Permanent(err)
	}
	return j, rev, err
}

// CreateJob creates the batch's header first unless this instance knows it is stored: a
// create that finds the key costs two round trips and changes nothing.
func (b buckets) CreateJob(ctx context.Context, j *records.Job, header *records.Batch) (bool, error) {
	if header != nil {
		key := records.BatchKey(header.Tenant, header.Batch)
		if _, known := b.s.headers.Load(key); !known {
			if err := b.s.records.EnsureHeader(ctx, *header); err != nil {
				return false, err
			}
			b.s.knowHeader(key)
		}
	}
	return b.s.records.CreateJob(ctx, j)
}

func (b buckets) PutJob(ctx context.Context, j *records.Job, rev uint64) (bool, error) {
	if err := b.s.records.PutJob(ctx, j, rev); err != nil {
		if kv.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (b buckets) State(ctx context.Context, key string) ([]byte, uint64, error) {
	if b.s.views == nil {
		return nil, 0, fmt.Errorf("view %s: no views bucket", key)
	}
	e, err := b.s.views.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("load view %s: %w", key, err)
	}
	return e.Value(), e.Revision(), nil
}

func (b buckets) PutState(ctx context.Context, key string, data []byte, rev uint64) (bool, error) {
	if err := kv.CompareAndSet(ctx, b.s.views, key, data, rev); err != nil {
		if kv.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("store view %s: %w", key, err)
	}
	return true, nil
}

func (b buckets) Document(ctx context.Context, tenant string, d events.Blob) ([]byte, error) {
	data, _, err := blob.ReadAll(ctx, b.s.blobs, blob.Ref{Tenant: tenant, SHA256: d.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.SHA256, err)
	}
	return data, nil
}

func (b buckets) Claim(ctx context.Context, tenant, batch string) (string, error) {
	return b.s.records.Spotcheck(ctx, tenant, batch)
}

func (b buckets) TakeClaim(ctx context.Context, tenant, batch, job string) (string, error) {
	return b.s.records.ClaimSpotcheck(ctx, tenant, batch, job)
}

// UpdateHeader notes a header it stored as known, so the batch's later jobs skip
// creating it.
func (b buckets) UpdateHeader(ctx context.Context, tenant, batch string, change func(*records.Batch) *records.Batch) error {
	var stored bool
	if _, err := b.s.records.UpdateHeader(ctx, tenant, batch, func(cur *records.Batch) *records.Batch {
		next := change(cur)
		stored = next != nil
		return next
	}); err != nil {
		return err
	}
	if stored {
		b.s.knowHeader(records.BatchKey(tenant, batch))
	}
	return nil
}

func (b buckets) PlanPage(ctx context.Context, tenant string, page events.Blob) (*records.PlanPage, error) {
	p, err := records.LoadPlanPage(ctx, b.s.blobs, tenant, page)
	if errors.Is(err, records.ErrCorrupt) {
		return nil, bus.Permanent(err)
	}
	return p, err
}

// Done counts the job in its batch's completion shards and completes the batch when it
// was the last (complete.go); the aggregator folds no completion for anyone else.
func (b buckets) Done(ctx context.Context, j *records.Job) ([]events.Event, *rulebook.Completion, error) {
	evs, err := b.s.done(ctx, j)
	return evs, nil, err
}

func (b buckets) Header(ctx context.Context, tenant, batch string) (*records.Batch, uint64, error) {
	h, rev, err := b.s.records.Header(ctx, tenant, batch)
	if errors.Is(err, records.ErrCorrupt) {
		return nil, 0, bus.Permanent(err)
	}
	return h, rev, err
}

func (b buckets) PutHeader(ctx context.Context, h *records.Batch, rev uint64) (bool, error) {
	if err := b.s.records.PutHeader(ctx, h, rev); err != nil {
		if kv.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (b buckets) EachJob(ctx context.Context, tenant, batch string, fn func(*records.Job) error) error {
	err := b.s.records.EachJob(ctx, tenant, batch, fn)
	if errors.Is(err, records.ErrCorrupt) {
		return bus.Permanent(err)
	}
	return err
}

// PutCompleted stores a completion's manifests and index in blob storage, as the
// batch's completion does (complete.go).
func (b buckets) PutCompleted(ctx context.Context, tenant, batch string, c *rulebook.Completed) error {
	return b.s.putCompleted(ctx, tenant, batch, c)
}
