package client

import (
	"context"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Resume finishes an interrupted submission of b as batchID: it publishes what the
// aggregator has not recorded (the batch.opened and every job missing from the jobs
// bucket) under the same batch id and the same deterministic event ids the first
// submission used. A copy of an event the first one did publish is dropped by the stream
// within its duplicate window, and after it the aggregator's rules ignore a repeated
// job.submitted of a recorded job; sending only the unrecorded jobs keeps even that from
// happening (a job published but not yet recorded is sent again, harmlessly).
//
// The job set must be the one first submitted: the header's size and, once the batch's
// batch.opened is recorded, its plan digest are compared with b's, and a batch file (or
// artifact) changed since refuses the resume with a RefusedError saying so, as does a
// cancelled batch. Resuming a batch of which nothing
// is recorded submits it whole; resuming a complete one publishes nothing. Reading the
// buckets needs the services' NATS user (or an ingress holding it).
func (s *Submitter) Resume(ctx context.Context, bk bus.Buckets, b *batch.Batch, tenant, batchID string) (Submission, error) {
	if err := events.ValidateName(batchID); err != nil {
		return Submission{}, fmt.Errorf("batch id: %w", err)
	}
	prep, err := s.Prepare(ctx, b, tenant)
	if err != nil {
		sub := Submission{Tenant: tenant, BatchID: batchID}
		if prep != nil {
			sub.Rejected, sub.Jobs, sub.Blocked = prep.Rejected, prep.Len(), prep.Blocked
		}
		return sub, err
	}
	return s.ResumePrepared(ctx, bk, prep, tenant, batchID)
}

// ResumePrepared is Resume of a batch Prepare has already read and hashed (the
// all-in-one mode prepares a batch once, before it knows whether it continues one).
func (s *Submitter) ResumePrepared(ctx context.Context, bk bus.Buckets, prep *Prepared, tenant, batchID string) (Submission, error) {
	if err := events.ValidateName(batchID); err != nil {
		return Submission{}, fmt.Errorf("batch id: %w", err)
	}
	sub := Submission{Tenant: tenant, BatchID: batchID, Rejected: prep.Rejected, Jobs: prep.Len(), Blocked: prep.Blocked}
	store := records.New(bk)
	h, _, err := store.Header(ctx, tenant, batchID)
	if err != nil {
		return sub, err
	}
	if h != nil && h.Cancel != nil {
		return sub, &RefusedError{Batch: batchID, Problems: []string{fmt.Sprintf("batch %s was cancelled by %s at %s: submit the batch again as a new batch",
			batchID, h.Cancel.By, h.Cancel.At.Format("2006-01-02 15:04:05Z07:00"))}}
	}
	if h != nil {
		if h.Size != prep.Len() {
			return sub, &RefusedError{Batch: batchID, Problems: []string{fmt.Sprintf("batch %s was submitted with %d jobs and %s now plans %d: the batch file changed since; submit it as a new batch, or restore the file to resume",
				batchID, h.Size, prep.batch.Path, prep.Len())}}
		}
		if h.Plan != nil && h.Plan.Digest != prep.Digest() {
			return sub, &RefusedError{Batch: batchID, Problems: []string{fmt.Sprintf("%s or its artifacts changed since batch %s was submitted (plan digest %s, now %s): submit it as a new batch, or restore the files to resume",
				prep.batch.Path, batchID, h.Plan.Digest, prep.Digest())}}
		}
		if h.Completion != nil {
			sub.Recorded = prep.Len()
			return sub, nil
		}
	}
	var recorded map[string]bool
	if h != nil {
		if recorded, err = store.JobIDs(ctx, tenant, batchID); err != nil {
			return sub, err
		}
	}
	err = s.publish(ctx, prep, tenant, batchID, recorded, h != nil && h.Plan != nil, &sub)
	return sub, err
}

// CancelRequest asks the aggregator to end a batch: every job of it without an outcome,
// including jobs a killed submission never published, is blocked with stage "cancel" and
// reason "cancelled by <by>", and the batch completes once, with its manifests. It only
// publishes (a team's NATS user may: batch.cancel.requested is among its ingress subjects);
// Cancel checks first when the batch state is readable.
func CancelRequest(pub Publisher, tenant, batchID, by string) error {
	msgs, err := bus.Messages(CancelEvent(tenant, batchID, &events.BatchCancelRequested{By: by}))
	if err != nil {
		return fmt.Errorf("cancel %s: %w", batchID, err)
	}
	if err := pub.Publish("", msgs...); err != nil {
		return fmt.Errorf("cancel %s: %w", batchID, err)
	}
	return nil
}

// Cancel checks that a batch can be cancelled and asks for it (CancelRequest). A batch
// the services do not know, one that is complete already (nothing to cancel: a
// RefusedError), and one whose client announced no plan (a client from before
// batch.opened, so its never-submitted jobs cannot be named) are refused with nothing
// published. It returns the header as read; a cancel asked for again republishes the same
// event, which changes nothing.
func Cancel(ctx context.Context, bk bus.Buckets, pub Publisher, tenant, batchID, by string) (*records.Batch, error) {
	h, _, err := records.New(bk).Header(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	refuse := func(why string) (*records.Batch, error) {
		return h, &RefusedError{Batch: batchID, Problems: []string{why}}
	}
	switch {
	case h == nil:
		return refuse(fmt.Sprintf("batch %s/%s is not known: nothing of it was recorded (was it submitted under another tenant?)", tenant, batchID))
	case h.Completion != nil:
		return refuse(fmt.Sprintf("batch %s is complete: nothing to cancel", batchID))
	case h.Plan == nil:
		return refuse(fmt.Sprintf("batch %s has no plan recorded (its batch.opened is not handled yet, or its client predates it): its unsubmitted jobs cannot be named", batchID))
	}
	return h, CancelRequest(pub, tenant, batchID, by)
}
