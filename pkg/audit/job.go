package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// RunJob audits one job of one batch (f.BatchID, f.Tenant when set) as Run audits a
// batch, over only the events that job's outcome rests on: its own events (submission,
// render and gates, verdicts, loop steps, dead letters, cancels, redrives) and the
// batch's inputs read with them (a batch cancel; the batch's opening when the read
// starts before it, see Window). Each is
// checked as in a whole audit: subject and id, digest chain, artifacts and call records
// read back, gates re-run, and the aggregator's rules re-derive the job's decisions from
// them. What is the batch's rather than the job's (its opening and plan pages, its
// completion and manifests) is left to the batch's audit and said so in the report
// (Unverified).
//
// It reads the stream once and decodes only the messages that can be the job's: the
// bytes of every event name its batch and job, so the rest are passed over unread, and
// one AC of a 100,000-job batch is audited in about the time the stream takes to pass.
// A looping kind's job carries its view's loop over from earlier batches: it is refused
// (audit its batch), as a partial replay would misreport its loop steps.
func RunJob(ctx context.Context, js jetstream.JetStream, f Filter, job string, store blob.Store) (Report, error) {
	return RunJobIn(ctx, js, f, job, store, Window{})
}

// Window is where in the stream one job's events are, as its record tells: From its
// submission's time, To its decision's (zero: the stream's first message, its last).
// It only narrows the read: the read starts over from the stream's first message when
// it finds no submission of the job after From, and it ends after To only once the
// job's outcome was read, so neither a publisher's clock nor the aggregator's can hide
// an event that decides the job.
type Window struct {
	From, To time.Time
}

// RunJobIn is RunJob reading only the job's window of the stream.
func RunJobIn(ctx context.Context, js jetstream.JetStream, f Filter, job string, store blob.Store, w Window) (Report, error) {
	if f.BatchID == "" || job == "" {
		return Report{}, errors.New("audit: one job's audit needs its batch and its id")
	}
	if f.Tenant != "" {
		if err := events.ValidateTenant(f.Tenant); err != nil {
			return Report{}, fmt.Errorf("audit: %w", err)
		}
	}
	name := f.Stream
	if name == "" {
		name = DefaultStream
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return Report{}, fmt.Errorf("audit: open stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("audit: stream %s info: %w", name, err)
	}
	var recs []Recorded
	if info.State.Msgs > 0 {
		if recs, err = readJob(ctx, js, name, info.State.LastSeq, f, job, w); err != nil {
			return Report{}, err
		}
	}
	for _, r := range recs {
		if r.OK() && r.DeadLetter == "" && looping(kindOf(r.Event)) {
			return Report{}, fmt.Errorf("audit: job %s is a %s job, whose view's loop carries over from earlier batches: audit its batch (--batch %s)", job, kindOf(r.Event), f.BatchID)
		}
	}
	h := newAhead(f.BatchID)
	for i := range recs {
		h.add(&recs[i])
	}
	h.done()
	a := newAuditor(ctx, store, h)
	a.job = job
	for i := range recs {
		a.visit(&recs[i])
	}
	rep := a.finish()
	rep.Job = job
	for _, b := range rep.Batches {
		rep.Unverified = append(rep.Unverified, Unverified{Tenant: b.Tenant, Batch: b.Batch, Job: job,
			What: "the batch's opening (its plan pages), completion, manifests and header", Why: "they are the batch's, not the job's: audited with the batch (--batch), not with one job (--job)"})
	}
	return rep, nil
}

// readJob reads the messages that can be job's, in stream order, within w (see Window).
func readJob(ctx context.Context, js jetstream.JetStream, stream string, last uint64, f Filter, job string, w Window) ([]Recorded, error) {
	o := bus.ReadOptions{Last: last, Since: w.From}
	if f.Tenant != "" {
		o.FilterSubjects = []string{events.TenantAll(f.Tenant), events.DeadLetterPrefix + ".>"}
	}
	batchB, jobB := []byte(f.BatchID), []byte(job)
	var recs []Recorded
	submitted, decided := false, false
	err := bus.ReadStream(ctx, js, stream, o, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		if !w.To.IsZero() && decided && md.Timestamp.After(w.To) {
			return false
		}
		data, subject := m.Data(), m.Subject()
		if !bytes.Contains(data, batchB) {
			return true // not the batch's: every event names its batch
		}
		if !bytes.Contains(data, jobB) && !batchInputSubject(subject) {
			return true // another job's
		}
		r := record(m, md)
		if !ofJob(&r, f, job) {
			return true
		}
		recs = append(recs, r)
		if r.OK() && r.DeadLetter == "" && r.Event.JobID == job {
			_, isSub := r.Event.Payload.(*events.JobSubmitted)
			submitted = submitted || isSub
			decided = decided || isOutcome(r.Event)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("audit: replay of %s for job %s: %w", stream, job, err)
	}
	if !submitted && !w.From.IsZero() {
		// Nothing submitted the job after From: its events may be older than its
		// record says. Read them all.
		return readJob(ctx, js, stream, last, f, job, Window{})
	}
	return recs, nil
}

// batchInputSubject reports whether subject carries events that name no job but decide
// jobs (a batch's opening, a batch cancel), or dead letters, which may hold one.
func batchInputSubject(subject string) bool {
	if strings.HasPrefix(subject, events.DeadLetterPrefix+".") {
		return true
	}
	_, t, err := events.ParseSubject(subject)
	return err == nil && (t == events.TypeBatchOpened || t == events.TypeBatchCancelRequested)
}

// ofJob reports whether r is one of job's events, or an input of its batch that names no
// job; an undecodable message is kept when what is left of its envelope names the batch.
func ofJob(r *Recorded, f Filter, job string) bool {
	if !r.OK() {
		tenant, batch := peekEnvelope(r.Raw)
		return batch == f.BatchID && (f.Tenant == "" || tenant == "" || tenant == f.Tenant)
	}
	ev := r.Event
	if ev.BatchID != f.BatchID || (f.Tenant != "" && ev.Tenant != f.Tenant) {
		return false
	}
	switch p := ev.Payload.(type) {
	case *events.BatchOpened, *events.BatchCancelRequested:
		return true
	case *events.SpotcheckRecorded:
		return p.ACID == job
	case *events.ViewReset:
		return p.ACID == job
	}
	return ev.JobID == job
}

// kindOf is the kind an event's job is judged by, "" when the event does not say.
func kindOf(ev events.Event) events.Kind {
	switch p := ev.Payload.(type) {
	case *events.JobSubmitted:
		return p.Spec.Kind
	case *events.RenderRequested:
		return p.Spec.Kind
	case *events.RenderDone:
		return p.Spec.Kind
	}
	return ""
}

// CheckJobState compares one job's record in the aggregator's key-value state with the
// one its replay (RunJob) re-derived: field by field, and link by link the events its
// outcome rests on.
func CheckJobState(ctx context.Context, rep *Report, st records.Store, tenant, batch, job string) error {
	c := newStateCheck(ctx, rep, tenant, batch)
	j, _, err := st.Job(ctx, tenant, batch, job)
	if err != nil {
		return fmt.Errorf("audit: read the record of job %s of %s/%s: %w", job, tenant, batch, err)
	}
	if j != nil {
		c.job(j)
	} else if c.st.audited[c.bk] && c.st.mem.JobJSON(tenant, batch, job) != nil {
		c.add(Mismatch{Kind: KindMissing, Tenant: tenant, Batch: batch, Job: job, EventType: "job record", Field: "record",
			Detail: "the key-value state holds no record of a job the events submit"})
	}
	sort.SliceStable(rep.Mismatches, func(i, k int) bool { return rep.Mismatches[i].Seq < rep.Mismatches[k].Seq })
	return nil
}
