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
//
// A job the stream holds no event of (never submitted to the batch, or every event of it
// gone) re-derives nothing, and a clean report of it would be a silent pass: RunJob then
// returns an error wrapping ErrJobNotInStream, with the report of what it read, so the
// caller can say whether the aggregator holds a record of it (CheckJobState reports one).
func RunJob(ctx context.Context, js jetstream.JetStream, f Filter, job string, store blob.Store) (Report, error) {
	return RunJobIn(ctx, js, f, job, store, Window{})
}

// ErrJobNotInStream is the error (wrapped, naming the job) of a one-job audit that read
// no event of its job: neither its submission nor any later step of it.
var ErrJobNotInStream = errors.New("the stream holds no event of the job")

// Window is where in the stream one job's events are, as its record tells: From its
// submission's time, To its decision's (zero: the stream's first message, its last).
// It only narrows the read: the read starts over from the stream's first message when
// it finds no submission of the job after From, and it ends after To only once the
// job's outcome was read, so neither a publisher's clock nor the aggregator's can hide
// an event that decides the job.
type Window struct {
	From, To time.Time
	// Positions and Links are the job record's (records.Job.Positions and Inputs):
	// where the stream holds each event the job's outcome rests on. When they are
	// given for a decided job (To set) and every position is known, only those messages
	// are read, by sequence, and the job's outcome after the last of them (an ordered
	// read of the outcomes' subjects from there, see readAt); the rest of the stream is
	// not read. Each message read must be the event its link names (id and digest), or
	// the record's position is a finding and the job is read as without them. f.Tenant
	// must be set (the outcomes' subjects are the tenant's).
	Positions []uint64
	Links     []string
	// Stored is when the record that decided the job was stored (its key-value entry's
	// time): its outcome is published after it, so the read of the outcome starts there
	// (less outcomeSlack), not after the deciding input, which a lagging aggregator
	// may have handled tens of thousands of outcomes later. Zero: after the last
	// position. An outcome the read misses leaves the audit at the positions unclean,
	// and the job is read over the stream.
	Stored time.Time
}

// outcomeSlack is how much earlier than the record's storing the read of the outcome
// starts, for the clocks of a cluster's stream leaders.
const outcomeSlack = 2 * time.Second

// positional reports whether w's positions are all known and fit its links.
func (w Window) positional() bool {
	if w.To.IsZero() || len(w.Positions) == 0 || len(w.Positions) != len(w.Links) {
		return false
	}
	for _, p := range w.Positions {
		if p == 0 {
			return false
		}
	}
	return true
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
	var misplaced []Mismatch
	if info.State.Msgs > 0 && f.Tenant != "" && w.positional() {
		recs, bad, n, ok, err := readAt(ctx, js, st, name, info.State.LastSeq, f, job, w)
		if err != nil {
			return Report{}, err
		}
		misplaced = bad
		if ok {
			rep, err := auditJobEvents(ctx, f, job, store, recs)
			if err != nil {
				return Report{}, err
			}
			// Only a clean audit stands on the record's positions alone: any finding
			// (an event missing from them, a link that does not hold) is looked for
			// again over the stream, as without positions, so the report is the one
			// the stream gives.
			if rep.OK() && namesJob(recs, job) {
				rep.Read = n
				rep.Unverified = append(rep.Unverified, Unverified{Tenant: f.Tenant, Batch: f.BatchID, Job: job,
					What: "events of the job that its record does not name (an input that changed nothing, a copy published later)",
					Why:  "the job's events were read at the positions its record keeps, not by passing over the stream: audited with the batch (--batch)"})
				return withBatchNote(rep, f, job), nil
			}
		}
	}
	var recs []Recorded
	n := 0
	if info.State.Msgs > 0 {
		if recs, err = readJob(ctx, js, name, info.State.LastSeq, f, job, w, &n); err != nil {
			return Report{}, err
		}
	}
	rep, err := auditJobEvents(ctx, f, job, store, recs)
	if err != nil {
		return Report{}, err
	}
	rep.Read = n
	if len(misplaced) > 0 {
		// Not append(misplaced, ...) alone: none misplaced would leave a clean report's
		// mismatches nil, null in JSON, where a batch's audit gives [].
		rep.Mismatches = append(misplaced, rep.Mismatches...)
	}
	rep = withBatchNote(rep, f, job)
	if !namesJob(recs, job) && !anyUndecodable(recs) {
		// An undecodable message of the batch may be one of the job's: it is a finding
		// of the report already, which then fails.
		rep.unseen = true
		return rep, fmt.Errorf("audit: job %s of batch %s of %s: %w (%d messages of stream %s read, none of the job's)",
			job, f.BatchID, tenantsOf(f, rep), ErrJobNotInStream, n, name)
	}
	return rep, nil
}

// namesJob reports whether any of recs (ofJob's) is an event of job itself, not only an
// input of its batch.
func namesJob(recs []Recorded, job string) bool {
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		switch r.Event.Payload.(type) {
		case *events.BatchOpened, *events.BatchCancelRequested:
			continue
		}
		return true
	}
	return false
}

// anyUndecodable reports whether any of recs does not decode.
func anyUndecodable(recs []Recorded) bool {
	for i := range recs {
		if !recs[i].OK() {
			return true
		}
	}
	return false
}

// tenantsOf names the tenant a one-job audit looked in, for its error: f's, or the
// tenants of the batches it read, or any.
func tenantsOf(f Filter, rep Report) string {
	if f.Tenant != "" {
		return "tenant " + f.Tenant
	}
	var ts []string
	for _, b := range rep.Batches {
		ts = append(ts, b.Tenant)
	}
	if len(ts) == 0 {
		return "any tenant"
	}
	return "tenant " + strings.Join(ts, ", ")
}

// auditJobEvents audits the events read of one job (RunJobIn).
func auditJobEvents(ctx context.Context, f Filter, job string, store blob.Store, recs []Recorded) (Report, error) {
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
	return rep, nil
}

// withBatchNote says what one job's audit leaves to its batch's.
func withBatchNote(rep Report, f Filter, job string) Report {
	for _, b := range rep.Batches {
		rep.Unverified = append(rep.Unverified, Unverified{Tenant: b.Tenant, Batch: b.Batch, Job: job,
			What: "the batch's opening (its plan pages), completion, manifests and header", Why: "they are the batch's, not the job's: audited with the batch (--batch), not with one job (--job)"})
	}
	return rep
}

// readJob reads the messages that can be job's, in stream order, within w (see Window).
func readJob(ctx context.Context, js jetstream.JetStream, stream string, last uint64, f Filter, job string, w Window, n *int) ([]Recorded, error) {
	o := bus.ReadOptions{Last: last, Since: w.From}
	if f.Tenant != "" {
		o.FilterSubjects = []string{events.TenantAll(f.Tenant), events.DeadLetterPrefix + ".>"}
	}
	batchB, jobB := []byte(f.BatchID), []byte(job)
	var recs []Recorded
	submitted, decided := false, false
	err := bus.ReadStream(ctx, js, stream, o, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		*n++
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
		return readJob(ctx, js, stream, last, f, job, Window{}, n)
	}
	return recs, nil
}

// readAt reads the messages at w's positions by sequence and then, from the last of
// them on, the job's outcome (see Window): read is false when they cannot be read this
// way (the store refuses a read by sequence, a position does not hold the event its
// link names), and the caller reads the stream instead. A position that holds another
// message is a finding, returned in misplaced: the record sends its auditor elsewhere.
func readAt(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, stream string, last uint64, f Filter, job string, w Window) (recs []Recorded, misplaced []Mismatch, n int, read bool, err error) {
	seen := map[uint64]bool{}
	after := uint64(0)
	for i, seq := range w.Positions {
		after = max(after, seq)
		if seen[seq] {
			continue
		}
		seen[seq] = true
		m, err := st.GetMsg(ctx, seq)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil, n, false, nil // read by sequence refused: read the stream
		}
		n++
		var r Recorded
		if err == nil {
			raw := rawMsg{seq: m.Sequence, subject: m.Subject, stored: m.Time, data: m.Data}
			if h := m.Header; h != nil {
				raw.msgID, raw.reason, raw.original = h.Get(jetstream.MsgIDHeader), h.Get(bus.MetaReason), h.Get(bus.MetaOriginalSubject)
				raw.chainSeqs = h.Get(bus.MetaChainSeqs)
			}
			r = raw.record()
		}
		if err != nil || !r.OK() || r.link() != w.Links[i] || !ofJob(&r, f, job) {
			holds := "no message"
			if err == nil {
				holds = "another message (" + r.Subject + ", " + r.link() + ")"
			}
			misplaced = append(misplaced, Mismatch{Kind: KindMismatch, Tenant: f.Tenant, Batch: f.BatchID, Job: job,
				EventType: "job record", Seq: seq, Field: fmt.Sprintf("positions[%d]", i), Recorded: fmt.Sprint(seq), Derived: w.Links[i],
				Detail: fmt.Sprintf("the job record says the stream holds %s at sequence %d, where it holds %s: the job was read from the stream instead", w.Links[i], seq, holds)})
			continue
		}
		recs = append(recs, r)
	}
	if len(misplaced) > 0 {
		return nil, misplaced, n, false, nil
	}
	// The outcome is published once the record that decides it is stored: after the
	// deciding input, on one of two subjects. The read ends at it, or at the stream's
	// end when it was never published (the replay then reports it missing).
	subjects := make([]string, 0, 2)
	for _, t := range []events.Type{events.TypeIterationDecided, events.TypeJobBlocked} {
		s, err := events.Subject(f.Tenant, t)
		if err != nil {
			return nil, nil, n, false, fmt.Errorf("audit: job %s: %w", job, err)
		}
		subjects = append(subjects, s)
	}
	if after < last {
		batchB, jobB := []byte(f.BatchID), []byte(job)
		o := bus.ReadOptions{From: after + 1, Last: last, FilterSubjects: subjects, Batch: 256}
		if !w.Stored.IsZero() {
			o.From, o.Since = 0, w.Stored.Add(-outcomeSlack)
		}
		err := bus.ReadStream(ctx, js, stream, o, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
			n++
			if !bytes.Contains(m.Data(), batchB) || !bytes.Contains(m.Data(), jobB) {
				return true
			}
			r := record(m, md)
			if !r.OK() || !ofJob(&r, f, job) {
				return true
			}
			recs = append(recs, r)
			return !(r.Event.JobID == job && isOutcome(r.Event))
		})
		if err != nil {
			return nil, nil, n, false, fmt.Errorf("audit: read the outcome of job %s from %s: %w", job, stream, err)
		}
	}
	sort.Slice(recs, func(i, k int) bool { return recs[i].Seq < recs[k].Seq })
	return recs, nil, n, true, nil
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
// outcome rests on. A record of a job whose replay read no event of it
// (ErrJobNotInStream) is one finding: nothing proves it. The error of a job the state
// holds no record of wraps records.ErrNotRecorded.
func CheckJobState(ctx context.Context, rep *Report, st records.Store, tenant, batch, job string) error {
	c := newStateCheck(ctx, rep, tenant, batch)
	j, _, err := st.Job(ctx, tenant, batch, job)
	if errors.Is(err, records.ErrNotRecorded) && !rep.unseen {
		// The events submit the job: the record's absence is a finding, as in a batch's
		// comparison, not a check left undone.
		j, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("audit: read the record of job %s of %s/%s: %w", job, tenant, batch, err)
	}
	if j != nil && rep.unseen {
		// Readers believe the record, and not one event is left to prove it.
		c.add(Mismatch{Kind: KindMissing, Tenant: tenant, Batch: batch, Job: job, EventType: "job record", Field: "job.submitted",
			Detail: fmt.Sprintf("the aggregator holds a record of the job (status %s, attempt %d) but the stream holds no event of it: nothing is left to prove what the record says", j.Status, j.Attempt)})
	} else if j != nil {
		c.job(j)
	} else if c.st.audited[c.bk] && c.st.mem.JobJSON(tenant, batch, job) != nil {
		c.add(Mismatch{Kind: KindMissing, Tenant: tenant, Batch: batch, Job: job, EventType: "job record", Field: "record",
			Detail: "the key-value state holds no record of a job the events submit"})
	}
	sort.SliceStable(rep.Mismatches, func(i, k int) bool { return rep.Mismatches[i].Seq < rep.Mismatches[k].Seq })
	return nil
}
