package rulebook

import (
	"fmt"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// CancelStage is the stage a cancelled job is blocked at.
const CancelStage = "cancel"

// BatchWide reports whether an input acts on a whole batch (its header) rather than on
// one job: ApplyBatch takes it instead of Apply.
func BatchWide(ev events.Event) bool {
	switch ev.Payload.(type) {
	case *events.BatchOpened, *events.BatchCancelRequested:
		return true
	}
	return false
}

// BatchState is what the rules read for a batch-wide input, loaded by the caller.
type BatchState struct {
	// Header is the batch's header; nil when none is stored yet.
	Header *records.Batch
	// Page is the plan page a cancel step names (BatchResult.NeedPage), once loaded.
	Page *records.PlanPage
	// Now is the time the rules stamp when the input carries none.
	Now time.Time
}

// BatchResult is what the rules decided for a batch-wide input.
type BatchResult struct {
	// Header is the header to store (by compare-and-set), nil when it stays as it is.
	Header *records.Batch
	// Publish are the events to publish after storing, in order.
	Publish []events.Event
	// NeedPage asks the caller to load this plan page into State.Page and apply the
	// input again.
	NeedPage *events.Blob
	// NotRecorded says the batch's plan is not recorded yet (its batch.opened has not
	// been applied): the input is retried until it is.
	NotRecorded bool
}

// ApplyBatch applies one batch-wide input to its batch's header. It never changes st.
func ApplyBatch(st BatchState, in Input) (BatchResult, error) {
	ev := in.Event
	if !ev.Time.IsZero() {
		st.Now = ev.Time.UTC()
	}
	if err := CheckOrigin(in); err != nil {
		return BatchResult{}, err
	}
	if in.DeadLetter != nil {
		// A dead letter blocks the job it names; a batch-wide event names none.
		return BatchResult{}, nil
	}
	switch p := ev.Payload.(type) {
	case *events.BatchOpened:
		return opened(st, ev, p)
	case *events.BatchCancelRequested:
		return cancelRequested(st, ev, p)
	}
	return BatchResult{}, fmt.Errorf("%w: %s does not act on a batch", ErrRefused, ev.Type)
}

// opened records a batch's size and plan on its header. A repeated batch.opened (a
// redelivery, a resumed submission) changes nothing; one that contradicts what the header
// holds (another job set under the same batch id) is refused.
func opened(st BatchState, ev events.Event, p *events.BatchOpened) (BatchResult, error) {
	h := st.Header
	key := records.BatchKey(ev.Tenant, ev.BatchID)
	if h != nil && h.Size != 0 && h.Size != p.Size {
		return BatchResult{}, fmt.Errorf("%w: batch.opened %s: batch %s has %d jobs, the event says %d", ErrRefused, ev.ID, key, h.Size, p.Size)
	}
	if h != nil && h.Plan != nil {
		if h.Plan.Digest != p.Digest {
			return BatchResult{}, fmt.Errorf("%w: batch.opened %s: batch %s was opened with plan %s, the event has %s", ErrRefused, ev.ID, key, h.Plan.Digest, p.Digest)
		}
		return BatchResult{}, nil
	}
	next := &records.Batch{Tenant: ev.Tenant, Batch: ev.BatchID, CreatedAt: st.Now}
	if h != nil {
		c := *h
		next = &c
	}
	next.Size = p.Size
	if next.Source == "" {
		next.Source = p.Source
	}
	next.Plan = &records.Plan{Digest: p.Digest, Pages: append([]events.Blob(nil), p.Pages...)}
	return BatchResult{Header: next}, nil
}

// cancelRequested cancels one page of a batch's plan: it records the cancel on the header
// (the first one stays), asks every job of the page to be cancelled and the next page to
// follow. What it publishes depends on the plan alone, never on how far the jobs have got:
// each job's own rule (cancelled) decides whether there is anything left to cancel.
func cancelRequested(st BatchState, ev events.Event, p *events.BatchCancelRequested) (BatchResult, error) {
	h := st.Header
	if h == nil || h.Plan == nil {
		return BatchResult{NotRecorded: true}, nil
	}
	key := records.BatchKey(ev.Tenant, ev.BatchID)
	if p.Page >= len(h.Plan.Pages) {
		return BatchResult{}, fmt.Errorf("%w: batch.cancel.requested %s: page %d of batch %s, which has %d", ErrRefused, ev.ID, p.Page, key, len(h.Plan.Pages))
	}
	if st.Page == nil {
		ref := h.Plan.Pages[p.Page]
		return BatchResult{NeedPage: &ref}, nil
	}
	if err := st.Page.Check(p.Page, h.Size); err != nil {
		return BatchResult{}, fmt.Errorf("%w: batch %s: %v", ErrRefused, key, err)
	}
	var res BatchResult
	if h.Cancel == nil {
		next := *h
		next.Cancel = &records.Cancel{By: p.By, At: st.Now, Event: ev.ID}
		res.Header = &next
	}
	for i, j := range st.Page.Jobs {
		e := events.New(&events.JobCancelRequested{Kind: j.Kind, Index: st.Page.First + i, BatchSize: h.Size, By: p.By},
			ev.Tenant, ev.BatchID, j.ID, j.Iteration, "", &ev.Envelope)
		// Every event of a job carries the job's correlation, not the batch's.
		e.CorrelationID = events.CorrelationFor(ev.Tenant, ev.BatchID, j.ID)
		res.Publish = append(res.Publish, e)
	}
	if next := p.Page + 1; next < len(h.Plan.Pages) {
		res.Publish = append(res.Publish, events.New(&events.BatchCancelRequested{By: p.By, Page: next},
			ev.Tenant, ev.BatchID, "", 0, events.CancelStep(next), &ev.Envelope))
	}
	return res, nil
}

// cancelled ends one job of a cancelled batch. A job with its outcome keeps it (the
// outcome is announced again under its own ids, which the stream drops). Any other job,
// pending or never submitted, is recorded blocked as cancelled, from the cancel alone: the
// record names the job, its place in the batch and who cancelled it, and rests on the
// cancel only. It cannot depend on what the job had got to, because the cancel races with
// the job's own events (its submission, a panel's first votes, a loop's steps) and the
// aggregator may apply them in another order than the stream holds them, while a replay
// must arrive at the same record.
func cancelled(st State, in Input, p *events.JobCancelRequested) (Result, error) {
	ev := in.Event
	if ev.JobID == "" {
		return Result{}, fmt.Errorf("%w: job.cancel.requested %s names no job", ErrRefused, ev.ID)
	}
	j := st.Job
	if j != nil && j.Final() {
		return withRelease(Result{Done: true, Publish: Announced(j)}, j, nil)
	}
	k, err := kind.Lookup(p.Kind)
	if err != nil {
		return Result{}, fmt.Errorf("%w: job.cancel.requested %s: %v", ErrRefused, ev.ID, err)
	}
	if j != nil && (j.Spec.Kind != p.Kind || j.Index != p.Index || j.BatchSize != p.BatchSize) {
		return Result{}, fmt.Errorf("%w: job.cancel.requested %s: %s job %s at %d of %d, the cancel says %s at %d of %d",
			ErrRefused, ev.ID, j.Spec.Kind, j.Key(), j.Index, j.BatchSize, p.Kind, p.Index, p.BatchSize)
	}
	next := &records.Job{
		Tenant: ev.Tenant, Batch: ev.BatchID, ACID: ev.JobID, Index: p.Index, BatchSize: p.BatchSize,
		Spec: events.JobSpec{Kind: p.Kind, ACID: ev.JobID}, Iteration: ev.Iteration, CorrelationID: ev.CorrelationID,
		Status: events.StatusBlocked, BlockStage: CancelStage, BlockReason: "cancelled by " + p.By,
		DecidedBy: ev.ID, DecidedAt: st.Now,
	}
	if j != nil {
		// A redriven job's cancel counts toward its redrive; the inputs it held for
		// others (HE-2) are let go.
		next.Attempt, next.Held = j.Attempt, j.Held
	}
	if in.Link != "" {
		next.AddInput(in.Link, in.Seq)
	}
	k.Blocked(next)
	// Announced, not Outputs with the cancel's envelope: a redriven job's outcome has
	// ids of its attempt, the cancel none.
	res := Result{Job: next, Done: true, Publish: Announced(next)}
	if j == nil {
		res.Created = true
		res.Batch = &records.Batch{Tenant: ev.Tenant, Batch: ev.BatchID, Size: p.BatchSize, CreatedAt: st.Now}
	}
	return withRelease(res, next, nil)
}
