package aggregator

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/ctxtime"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// done counts a final job toward its batch's completion and, when it was the last one,
// completes the batch: its manifests and its batch.completed. A redriven job counts
// toward its redrive instead.
func (s *Service) done(ctx context.Context, j *records.Job) ([]events.Event, error) {
	if j.Attempt > 0 {
		return s.redriven(ctx, j)
	}
	complete, err := s.records.MarkDone(ctx, j.Tenant, j.Batch, j.Index, j.BatchSize)
	if err != nil || !complete {
		return nil, err
	}
	return s.complete(ctx, j, 0)
}

// redriven records that a redriven job has its new outcome; the last job of the redrive
// completes the batch again, with ids of that attempt.
func (s *Service) redriven(ctx context.Context, j *records.Job) ([]events.Event, error) {
	var last bool
	if _, err := s.records.UpdateHeader(ctx, j.Tenant, j.Batch, func(h *records.Batch) *records.Batch {
		var next *records.Batch
		next, last = rulebook.RedriveDone(h, j.ACID, j.Attempt)
		return next
	}); err != nil {
		return nil, err
	}
	if !last {
		return nil, nil
	}
	return s.complete(ctx, j, j.Attempt)
}

// complete builds the batch's completion from every job record, stores its manifests and
// records it on the header by compare-and-set. Only the job whose update recorded the
// completion announces it; a redelivery to that job announces it again under the same ids.
func (s *Service) complete(ctx context.Context, last *records.Job, attempt int) ([]events.Event, error) {
	h, _, err := s.records.Header(ctx, last.Tenant, last.Batch)
	if err != nil {
		return nil, err
	}
	if h != nil && h.Completion != nil && h.Completion.Attempt >= attempt {
		// Stored, and perhaps never announced: the publish after the store may have failed
		// (a partition). The job that completed it announces it again, under the same ids.
		// A completion revised by a late review (rulebook.Runner) announces what it
		// announced when the batch finished (records.Completion.Announced); one revised
		// before the header kept that says nothing of it, and is not announced again.
		c := h.Completion
		if c.Attempt != attempt || c.By != last.ACID || c.Revised != nil && c.Announced == nil {
			return nil, nil
		}
		return rulebook.CompletionEvents(h.Tenant, h.Batch, h.Completion), nil
	}
	fold, figures, err := s.foldFinal(ctx, last)
	if err != nil {
		return nil, err
	}
	// Each manifest is stored as it is encoded: a 1,000,000-AC manifest is over a GiB.
	c, err := fold.CompleteStored(last.ACID, attempt, func(mediaType string, r io.Reader) (events.Blob, error) {
		a, err := s.blobs.Put(ctx, last.Tenant, r, blob.PutOptions{MediaType: mediaType})
		if err != nil {
			return events.Blob{}, fmt.Errorf("store a %s of %s: %w", mediaType, records.BatchKey(last.Tenant, last.Batch), err)
		}
		return events.Blob{SHA256: a.Ref.SHA256, MediaType: mediaType, Size: a.Size}, nil
	})
	if err != nil {
		return nil, err
	}
	final, err := s.records.UpdateHeader(ctx, last.Tenant, last.Batch, func(cur *records.Batch) *records.Batch {
		if cur == nil {
			cur = &records.Batch{Tenant: last.Tenant, Batch: last.Batch, Size: last.BatchSize, CreatedAt: s.now()}
		}
		if cur.Completion != nil && cur.Completion.Attempt >= attempt {
			return nil
		}
		next := *cur
		comp := c.Completion
		next.Completion = &comp
		return &next
	})
	if err != nil {
		return nil, err
	}
	if final == nil || final.Completion == nil || final.Completion.By != last.ACID || final.Completion.Attempt != attempt {
		return nil, nil
	}
	s.judged(ctx, last.Tenant, last.Batch, figures, attempt)
	sum := final.Completion.Summary
	s.log.Info("batch complete", "tenant", last.Tenant, "batch", last.Batch, "attempt", attempt, "total", sum.Total,
		"compared", sum.Compared, "blocked", sum.Blocked, "suggestions", sum.Suggestions, "exit_code", sum.ExitCode)
	return rulebook.CompletionEvents(final.Tenant, final.Batch, final.Completion), nil
}

// putCompleted stores a completion's manifests and index in blob storage, where the
// completion's refs address them.
func (s *Service) putCompleted(ctx context.Context, tenant, batch string, c *rulebook.Completed) error {
	for kind, data := range c.Manifests {
		if _, err := blob.PutBytes(ctx, s.blobs, tenant, data, "application/json"); err != nil {
			return fmt.Errorf("store %s manifest of %s: %w", kind, records.BatchKey(tenant, batch), err)
		}
	}
	if c.Index != nil {
		if _, err := blob.PutBytes(ctx, s.blobs, tenant, c.Index, c.Completion.Index.MediaType); err != nil {
			return fmt.Errorf("store the index of %s: %w", records.BatchKey(tenant, batch), err)
		}
	}
	return nil
}

// completeReads is how many times the completion reads the batch's records before it
// gives up on a read that shows a job still pending (the event is then redelivered and
// the completion tried again).
const completeReads = 8

// completePause is the first pause between two reads, doubled each time up to 4 s
// (tests shorten it).
var completePause = 250 * time.Millisecond

// foldFinal folds every job record of the batch, with the judge figures beside it, job by
// job: every call of an AC is in its job's record, and the figures hold counts only
// (collect.FiguresFold). Every job is marked done when the completion runs, so a record
// read still pending is an old copy, as a scan's consumer on a member that lags behind
// the stream reads (a slowed link, a member catching up after a partition). The scan
// reads on the leader or a member it reports current (records.Store.EachJob); this is
// the check behind that. Folding such a record would complete the batch with a job as
// pending, a schema violation its rules never decided (TestClusterPartitions saw a
// 1,000-AC batch completed with 469 so), so the records are read again, after a pause
// that gives the member time, until none is pending.
func (s *Service) foldFinal(ctx context.Context, last *records.Job) (*rulebook.Fold, *collect.FiguresFold, error) {
	pause := completePause
	for read := 1; ; read++ {
		fold := rulebook.NewFold(last.Tenant, last.Batch)
		fold.KeepIndex()
		var figures collect.FiguresFold
		pending, first := 0, ""
		if err := s.records.EachJob(ctx, last.Tenant, last.Batch, func(j *records.Job) error {
			if j.Status == events.StatusPending || j.Status == "" {
				if pending++; first == "" {
					first = j.ACID
				}
				return nil
			}
			j.Memoize() // the fold and the judgments read the same decoded result
			fold.Add(j)
			figures.Add(collect.Judgments(j, trust.Lengths{}))
			j.Forget()
			return nil
		}); err != nil {
			return nil, nil, err
		}
		if pending == 0 {
			return fold, &figures, nil
		}
		err := fmt.Errorf("complete %s: %d jobs read still pending (%s first) though every job is marked done: the records were read from a member behind the stream",
			records.BatchKey(last.Tenant, last.Batch), pending, first)
		if read == completeReads {
			return nil, nil, err
		}
		s.log.Warn("the completion read records not yet current; reading again", "read", read, "err", err)
		if err := ctxtime.Sleep(ctx, pause); err != nil {
			return nil, nil, err
		}
		pause = min(2*pause, 4*time.Second)
	}
}
