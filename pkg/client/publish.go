package client

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// publishChunk is how many events one publish sends before waiting for their acks, and
// firstChunk the size of the first publish: chunks double from it, so the services get
// their first jobs at once.
const (
	publishChunk = 1000
	firstChunk   = 16
)

// Digest is the plan's SHA-256 over every job's id, iteration and spec: the same batch
// file with the same artifacts gives the same digest.
func (p *Prepared) Digest() string { return p.plan.Digest }

// publish publishes a prepared batch: its batch.opened first (unless opened says the
// header holds its plan already), then one job.submitted per job not in recorded, in
// chunks, each chunk acknowledged before the next is sent. A chunk's artifacts are stored
// before it is published, while the chunk before it is being published and acknowledged,
// so judging starts on the first jobs while the rest are still uploading. The first
// chunks are small for the same reason.
func (s *Submitter) publish(ctx context.Context, prep *Prepared, tenant, batchID string, recorded map[string]bool, opened bool, sub *Submission) error {
	if prep.Len() == 0 {
		return &RefusedError{Batch: prep.batch.Path, Problems: []string{"no job to submit"}}
	}
	if !opened {
		if err := s.storePages(ctx, prep, tenant); err != nil {
			return fmt.Errorf("batch %s: %w", batchID, err)
		}
		o := prep.plan
		msgs, err := bus.Messages(OpenedEvent(tenant, batchID, &o))
		if err != nil {
			return fmt.Errorf("batch %s: %w", batchID, err)
		}
		if err := s.Pub.Publish("", msgs...); err != nil {
			return fmt.Errorf("publish batch %s: %w", batchID, err)
		}
	}
	type chunk struct {
		msgs []*message.Message
		jobs int
	}
	ready := make(chan chunk, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(ready)
		var c chunk
		var names []string
		var arts *artifacts
		size := firstChunk
		send := func() error {
			if c.jobs == 0 {
				return nil
			}
			if err := s.upload(gctx, tenant, arts, names); err != nil {
				return err
			}
			select {
			case ready <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
			c, names, size = chunk{}, names[:0], min(2*size, publishChunk)
			return nil
		}
		// A window at a time: once its last chunk is handed over, nothing holds it.
		err := prep.each(gctx, func(w *window, pl *planned, i int, j Job) error {
			if w.arts != arts {
				if err := send(); err != nil {
					return err
				}
				arts = w.arts
			}
			if recorded[j.ID] {
				sub.Recorded++
				return nil
			}
			submitted := SubmittedEvent(tenant, batchID, j.ID, j.Iteration, &events.JobSubmitted{Spec: j.Spec, Index: i, BatchSize: prep.Len(), BatchSource: prep.batch.Path})
			m, err := bus.Messages(submitted)
			if err != nil {
				return fmt.Errorf("AC %s: %w", j.ID, err)
			}
			c.msgs, c.jobs = append(c.msgs, m...), c.jobs+1
			names = append(names, pl.Names...)
			if len(c.msgs) >= size {
				return send()
			}
			return nil
		})
		if err != nil {
			return err
		}
		return send()
	})
	g.Go(func() error {
		for c := range ready {
			if err := s.Pub.Publish("", c.msgs...); err != nil {
				return err
			}
			sub.Published += c.jobs
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("publish batch %s: after %d of %d jobs: %w", batchID, sub.Published+sub.Recorded, prep.Len(), err)
	}
	return nil
}
