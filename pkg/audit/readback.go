package audit

import (
	"errors"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// The blobs an event records besides a render's and its gates' artifacts (chain.go's
// artifacts): what a reader is shown as evidence must be what the events recorded,
// byte for byte, or the audit says it is not.

// recordedBlob is one blob an event names, as the audit reports it.
type recordedBlob struct {
	// field is its wire place in the event ("pages[0]", "calls[1].record").
	field string
	// what names it in a finding ("plan page 1 of 2 (jobs 0 to 4095)").
	what string
	blob events.Blob
}

// readOnce streams a blob of tenant through the store's digest check, keeping nothing.
// Unlike readBack it leaves the blob cache alone: a call record or a plan page is read
// once, and caching it would only push out the artifacts a render and its gates share.
func (a *auditor) readOnce(tenant, sha string) blobResult {
	ctx, cancel := a.blobContext()
	defer cancel()
	attrs, err := readThrough(ctx, a.store, blob.Ref{Tenant: tenant, SHA256: sha})
	return blobResult{attrs: attrs, err: err}
}

// verifyBlob reports what reading b back (res) shows keeps it from being the blob the
// event recorded: missing, its bytes no longer hashing to its address, another size or
// media type. A store that could not be asked leaves it unverified.
func (a *auditor) verifyBlob(r *Recorded, b recordedBlob, res blobResult) {
	if res.err != nil {
		switch {
		case errors.Is(res.err, blob.ErrNotFound), errors.Is(res.err, blob.ErrDigestMismatch), errors.Is(res.err, blob.ErrInvalidRef):
			a.add(a.at(r, Mismatch{Kind: KindUnreadable, Field: b.field, Recorded: b.blob.SHA256,
				Detail: b.what + " cannot be read back intact: " + res.err.Error()}))
		default:
			a.unverified(r, b.what, res.err.Error())
		}
		return
	}
	a.decided(batchKey{r.Event.Tenant, r.Event.BatchID})
	if res.attrs.Size != b.blob.Size {
		a.add(a.at(r, with(Mismatch{}, KindMismatch, b.field+".size", fmt.Sprint(res.attrs.Size), fmt.Sprint(b.blob.Size)).
			withDetail("the blob store holds "+b.what+" with another size than the event records")))
	}
	if res.attrs.MediaType != b.blob.MediaType {
		a.add(a.at(r, with(Mismatch{}, KindMismatch, b.field+".media_type", res.attrs.MediaType, b.blob.MediaType).
			withDetail("the blob store keeps "+b.what+" under another media type than the event records")))
	}
}

// planPages reads back every page of the plan a batch.opened records. The aggregator
// reads a page only to cancel the batch, and a cancel may never come, so without this a
// page could be altered or lost unnoticed until the day the batch is cancelled.
func (a *auditor) planPages(r *Recorded) {
	p, ok := r.Event.Payload.(*events.BatchOpened)
	if !ok || len(p.Pages) == 0 {
		return
	}
	if a.store == nil {
		a.note(batchKey{r.Event.Tenant, r.Event.BatchID}, "the batch's plan pages", "the audit was given no blob store")
		return
	}
	for i, page := range p.Pages {
		first := i * events.PlanPageSize
		last := min(first+events.PlanPageSize, p.Size) - 1
		a.verifyBlob(r, recordedBlob{field: fmt.Sprintf("pages[%d]", i), blob: page,
			what: fmt.Sprintf("plan page %d of %d (jobs %d to %d of %d)", i+1, len(p.Pages), first, last, p.Size)},
			a.readOnce(r.Event.Tenant, page.SHA256))
	}
}

// callRecords reads back the record of every judge call a verdict names: the exact
// prompt and raw answer the console shows reviewers. Its SHA-256 is the record's address
// in the vote (judge.call), so it is on the verdict's link of the job's digest chain,
// and the batch's digest covers it; reading it back shows the bytes are still those.
// Calls are numbered as the job record and the console number them (rulebook.CallsOf).
//
// A verdict recorded before call records were kept, or whose record could not be stored,
// names none: its calls are noted as not covered. A cached answer names the record of
// the call that paid for it, in an earlier batch or (with a judge cache shared across
// tenants) under another tenant: one not found under this tenant is noted, not reported,
// but one found must still be intact.
func (a *auditor) callRecords(r *Recorded) {
	v, ok := r.Event.Payload.(*events.VerdictEmitted)
	if !ok {
		return
	}
	calls := rulebook.CallsOf(v)
	bk := batchKey{r.Event.Tenant, r.Event.BatchID}
	for i, c := range calls {
		what := fmt.Sprintf("the record of judge call %d of %d of job %s", i+1, len(calls), r.Event.JobID)
		if c.Record == nil {
			a.unverified(r, "judge call records", "not covered: a verdict names no record of its call (recorded before call records were kept, or the record could not be stored)")
			continue
		}
		if a.store == nil {
			a.note(bk, "judge call records", "the audit was given no blob store")
			return
		}
		res := a.readOnce(r.Event.Tenant, c.Record.SHA256)
		if c.Cached && errors.Is(res.err, blob.ErrNotFound) {
			a.unverified(r, "the records of cached judge calls", "not covered: each is the record of the call that paid for the answer, and this tenant's store no longer holds it (pruned with that call's batch, or kept under another tenant by a shared judge cache)")
			continue
		}
		a.verifyBlob(r, recordedBlob{field: fmt.Sprintf("calls[%d].record", i), what: what, blob: *c.Record}, res)
	}
}
