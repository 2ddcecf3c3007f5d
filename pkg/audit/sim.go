package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/dictzstd"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// The audit re-derives decisions by running the aggregator's own rules (pkg/rulebook) in
// memory over the replayed inputs, in stream order: there is no copy of a rule here to
// drift from the one that decided. What the rules would publish is compared with what the
// stream holds.

type jobKey struct{ tenant, batch, job string }

type batchKey struct{ tenant, batch string }

// simBatch is what the audit keeps of a batch besides the rules' own state.
type simBatch struct {
	size int
	// completed counts the batch's completions so far: the first pass's, then one per
	// redrive whose last job became final again.
	completed int
	// started is the highest redrive attempt started.
	started int
	// completion is the latest completion re-derived: what the batch header must record.
	completion *records.Completion
	// revisedFrom is the review whose replay revised completion last (nil: none did):
	// the latest revision's announcement is expected from it (auditor.revisions).
	// deciding are the reviews of the batch that decided an outcome, by event id: an
	// earlier revision's announcement names one of them.
	revisedFrom *origin
	deciding    map[string]bool
}

// origin is the input an expected output derives from.
type origin struct {
	id      string
	typ     events.Type
	seq     uint64
	history bool
}

func originOf(r *Recorded) origin {
	return origin{id: r.Event.ID, typ: r.Event.Type, seq: r.Seq, history: r.History}
}

// expectation is an event the aggregator must have published.
type expectation struct {
	ev   events.Event
	from origin
	what string
	// skip are wire fields compared elsewhere (or not derivable).
	skip []string
	// manifest is the rebuilt manifest a manifest.emitted announces (its id in
	// auditor.rebuilt; 0: none): the stored one is compared with it by address, and field
	// by field when the announcement names another.
	manifest uint64
}

// A parked expectation is one waiting for its record, kept small: the aggregator's
// outputs can trail their inputs by a whole batch (a fast client's submissions ahead of
// their render requests, a fast judge's verdicts ahead of their decisions), so a
// 1,000,000-job batch may wait for hundreds of thousands of them at once. It is kept in
// auditor.waiting (a lot: in memory up to a budget, then on disk) as bytes: its id, the
// event encoded and compressed (by a codec per event type, see auditor.parking), where
// it derives from and the rebuilt manifest's id; what describes it is derived again from the
// event.

// park encodes an expectation to wait for its record.
func (a *auditor) park(e expectation) []byte {
	data, err := events.Encode(e.ev)
	if err != nil {
		panic("audit: an expected event that does not encode: " + err.Error())
	}
	b := appendString(nil, e.ev.ID)
	b = appendString(b, string(e.ev.Type))
	b = appendString(b, e.from.id)
	b = appendString(b, string(e.from.typ))
	b = binary.AppendUvarint(b, e.from.seq)
	b = append(b, boolByte(e.from.history))
	b = binary.AppendUvarint(b, e.manifest)
	return append(b, a.codec(e.ev.Type).Encode(data, true)...)
}

// parkedID is the id of the expectation p parks.
func parkedID(p []byte) string {
	id, _ := readString(p)
	return id
}

// unpark decodes a parked expectation.
func (a *auditor) unpark(p []byte) expectation {
	_, p = readString(p)
	typ, p := readString(p)
	var e expectation
	var fromTyp string
	e.from.id, p = readString(p)
	fromTyp, p = readString(p)
	e.from.typ = events.Type(fromTyp)
	seq, n := binary.Uvarint(p)
	e.from.seq, p = seq, p[n:]
	e.from.history, p = p[0] == 1, p[1:]
	e.manifest, n = binary.Uvarint(p)
	p = p[n:]
	data, err := a.codec(events.Type(typ)).Decode(p)
	if err == nil {
		var ev events.Event
		if ev, err = events.Decode(data); err == nil {
			e.ev, e.what, e.skip = ev, describe(ev), skipOf(ev)
			return e
		}
	}
	panic("audit: a parked expectation that does not decode: " + err.Error())
}

// keep encodes a recorded output to wait for its expectation in auditor.early: its id
// first (the lot checks it), where the stream holds it, then its bytes compressed.
func (a *auditor) keep(r *Recorded) []byte {
	b := appendString(nil, r.Event.ID)
	b = binary.AppendUvarint(b, r.Seq)
	b = appendString(b, r.Subject)
	stored, err := r.Stored.MarshalBinary()
	if err != nil {
		panic("audit: a stored time that does not encode: " + err.Error())
	}
	b = appendBytes(b, stored)
	b = appendString(b, r.MsgID)
	b = appendString(b, r.Reason)
	b = appendString(b, string(r.Event.Type))
	raw := r.Raw
	if raw == nil {
		// A copy kept without its bytes (kept): its event encodes as it decoded.
		var err error
		if raw, err = events.Encode(r.Event); err != nil {
			panic("audit: a recorded output that does not encode: " + err.Error())
		}
	}
	return append(b, a.codec(r.Event.Type).Encode(raw, true)...)
}

// unkeep decodes what keep encoded.
func (a *auditor) unkeep(p []byte) *Recorded {
	_, p = readString(p)
	seq, n := binary.Uvarint(p)
	subject, p := readString(p[n:])
	storedBytes, p := readBytes(p)
	msgID, p := readString(p)
	reason, p := readString(p)
	typ, p := readString(p)
	var stored time.Time
	err := stored.UnmarshalBinary(storedBytes)
	var raw []byte
	if err == nil {
		raw, err = a.codec(events.Type(typ)).Decode(p)
	}
	if err != nil {
		panic("audit: a kept output that does not decode: " + err.Error())
	}
	r := NewRecorded(seq, subject, stored, slices.Clone(raw), msgID, reason)
	r.Raw = nil
	return &r
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// readString reads what appendString wrote (the lot's own bytes: they are well formed).
func readString(b []byte) (string, []byte) {
	s, rest := readBytes(b)
	return string(s), rest
}

func readBytes(b []byte) ([]byte, []byte) {
	n, k := binary.Uvarint(b)
	return b[k : k+int(n)], b[k+int(n):]
}

// codec is the compression of the parked expectations of one event type: events of a
// type share most of their bytes, so the first one makes a good dictionary for the rest.
func (a *auditor) codec(t events.Type) *dictzstd.Codec {
	c := a.parking[t]
	if c == nil {
		c = &dictzstd.Codec{}
		a.parking[t] = c
	}
	return c
}

// applyInput feeds one recorded event to the rules. It returns false when the job it
// needs is not recorded yet (the aggregator retries such an event until the job's
// submission is handled).
func (a *auditor) applyInput(r *Recorded) bool {
	ev := r.Event
	in := rulebook.Input{Event: ev, Link: r.link(), Subject: r.Subject, Seq: r.Seq, ChainSeqs: r.ChainSeqs}
	if r.DeadLetter != "" {
		in.Subject = r.OriginalSubject
		in.DeadLetter = &rulebook.DeadLetter{Service: r.DeadLetter, Reason: r.Reason}
	}
	applied, err := a.mem.Apply(in)
	switch {
	case errors.Is(err, rulebook.ErrRefused):
		// The aggregator refuses it for good (and drops it): nothing is decided, but the
		// stream holds an input that acts for someone it may not act for.
		a.refuse(r, err)
		return true
	case errors.Is(err, errPlanUnread):
		bk := batchKey{ev.Tenant, ev.BatchID}
		a.planUnread[bk] = true
		a.note(bk, "the cancel's steps over the batch's plan", err.Error())
		return true
	case err != nil:
		a.unverified(r, "applying "+string(ev.Type), fmt.Sprintf("the aggregator cannot apply it either (%v); it dead-letters it", err))
		return true
	case applied.NotRecorded && rulebook.BatchWide(ev):
		// A cancel of a batch never opened: the aggregator retries it until it gives up on
		// it, and nothing is decided.
		return true
	case applied.NotRecorded:
		return false
	}
	if p, ok := ev.Payload.(*events.BatchOpened); ok {
		if b := a.batch(batchKey{ev.Tenant, ev.BatchID}); b.size == 0 {
			b.size = p.Size
		}
	}
	if p, ok := ev.Payload.(*events.JobSubmitted); ok && applied.Created {
		b := a.batch(batchKey{ev.Tenant, ev.BatchID})
		if p, ok := a.mem.PlaceOf(ev.Tenant, ev.BatchID, ev.JobID); ok {
			a.submittedAt(p, r.Seq)
		}
		if b.size == 0 {
			b.size = p.BatchSize
		}
	}
	if applied.Job != nil || !applied.Done {
		// A job with its outcome announces it again to every later input, under the ids
		// the stream holds already (it drops the copies): only the input that decided it
		// is expected to have published it.
		for _, e := range applied.Publish {
			if rulebook.IsRevision(e) {
				continue // the latest revision's is expected once the replay ends (revisions)
			}
			a.expect(expectation{ev: e, from: originOf(r), what: describe(e), skip: skipOf(e)})
		}
	}
	if _, ok := ev.Payload.(*events.ReviewRecorded); ok && applied.Decided != nil {
		b := a.batch(batchKey{ev.Tenant, ev.BatchID})
		if b.deciding == nil {
			b.deciding = map[string]bool{}
		}
		b.deciding[ev.ID] = true
	}
	if c := applied.Complete; c != nil {
		b := a.batch(batchKey{c.Tenant, c.Batch})
		b.completed++
		if !r.History {
			a.complete(batchKey{c.Tenant, c.Batch}, b, c, r)
		}
	}
	if c := applied.Revised; c != nil {
		// A person's review decided an outcome of a completed batch: the rules folded it
		// again, and the header must keep that completion, its manifests stored under the
		// addresses it names (stateCheck.header), and the stream its announcement.
		if b := a.batch(batchKey{ev.Tenant, ev.BatchID}); b.completion != nil {
			revised := c.Completion
			// What the completion announced when the batch finished, which the header
			// keeps: the rules' memory holds no more of a completion than who made it
			// (the audit folds it, complete), so it is the one re-derived here.
			revised.Announced = b.completion.Announced
			if revised.Announced == nil {
				revised.Announced = &records.Announcement{Summary: b.completion.Summary, Manifests: b.completion.Manifests, Digest: b.completion.Digest}
			}
			b.completion = &revised
			from := originOf(r)
			b.revisedFrom = &from
		}
	}
	if c := applied.Complete; c != nil {
		a.afterComplete(batchKey{c.Tenant, c.Batch})
	}
	return true
}

// refuse records an input the rules refuse: a dead letter whose original subject belongs
// to another tenant or type than its envelope (one team acting for another), a
// submission that contradicts itself. It decides nothing, so it is reported as refused
// (Report.Refused), naming where it came from, not as a finding about the batch its
// envelope names; outputs derived from it are unexplained.
func (a *auditor) refuse(r *Recorded, err error) {
	a.refused[r.Event.ID] = r.Event.Type
	if r.History {
		return
	}
	ev := r.Event
	ref := Refused{Tenant: ev.Tenant, Batch: ev.BatchID, Job: ev.JobID, EventID: ev.ID, EventType: ev.Type, Seq: r.Seq,
		Subject: r.Subject, DeadLetter: r.DeadLetter, Reason: rulebook.RefusalReason(err), Detail: err.Error()}
	if r.DeadLetter != "" {
		ref.Subject = r.OriginalSubject
	}
	if tenant, _, perr := events.ParseSubject(ref.Subject); perr == nil {
		ref.From = tenant
	}
	a.rep.Refused = append(a.rep.Refused, ref)
	a.refusedAt = append(a.refusedAt, a.visiting)
}

// describe names an expected output for a finding.
func describe(e events.Event) string {
	switch p := e.Payload.(type) {
	case *events.ManifestEmitted:
		if p.RevisedBy != "" {
			return "revised " + string(p.Kind) + " manifest announcement"
		}
		return string(p.Kind) + " manifest announcement"
	case *events.BatchCompleted:
		return "batch completion"
	case *events.IterationDecided:
		if p.Final {
			return "final outcome"
		}
		return "loop decision"
	case *events.JobBlocked:
		return "final outcome"
	case *events.SignoffRecorded:
		return "sign-off"
	case *events.RenderRequested:
		return kind.RenderName(p.Spec)
	}
	return string(e.Type)
}

// skipOf names what of an expected output is not derivable from events: a sign-off's time
// is kept to the second on the wire.
func skipOf(e events.Event) []string {
	if _, ok := e.Payload.(*events.SignoffRecorded); ok {
		return []string{"signed_off_at"}
	}
	return nil
}

func (a *auditor) batch(bk batchKey) *simBatch {
	b := a.batches[bk]
	if b == nil {
		b = &simBatch{}
		a.batches[bk] = b
	}
	return b
}

// redriveRequest follows `tribunal redrive` (client.Redrive) in stream order: its first
// render.requested of an attempt starts the redrive, as the client recorded it on the
// header, pending on every job of the attempt. Each request must be for a job the replay
// leaves blocked in a completed batch, the only jobs the client sends again.
func (a *auditor) redriveRequest(r *Recorded) {
	ev := r.Event
	bk := batchKey{ev.Tenant, ev.BatchID}
	b := a.batch(bk)
	if b.started < ev.Attempt {
		b.started = ev.Attempt
		a.mem.StartRedrive(ev.Tenant, ev.BatchID, ev.Attempt, a.ahead.redriveJobs(bk, ev.Attempt, r.Redrive))
		a.redriveNamed(r, a.ahead.of(bk).redrives[ev.Attempt])
	}
	j := a.mem.Job(ev.Tenant, ev.BatchID, ev.JobID)
	var why string
	switch {
	case j == nil:
		why = "its job is not recorded"
	case b.completed == 0:
		why = "its batch has not completed"
	case !rulebook.Redrivable(j):
		why = "the replay leaves its job " + string(j.Status) + ", not blocked"
	case j.Attempt >= ev.Attempt:
		why = fmt.Sprintf("its job is at attempt %d already", j.Attempt)
	}
	if why != "" {
		a.add(a.at(r, Mismatch{Kind: KindUnexplained, Field: "envelope.attempt", Recorded: fmt.Sprint(ev.Attempt),
			Detail: "a redrive request, but " + why + "; redrive sends only the blocked jobs of a completed batch"}))
	}
}

// redriveNamed checks the jobs a redrive's first request names (bus.MetaRedriveJobs)
// against those its requests send again (sent; all of them, but while a single read
// still gathers them, when it does not matter: that audit stands only if they agree).
// One job's audit (RunJob) reads no other job's request: its batch's audit checks it.
func (a *auditor) redriveNamed(r *Recorded, sent []string) {
	if r.Redrive == nil || a.ahead.live || a.job != "" {
		return
	}
	var extra, unsent []string
	for _, j := range r.Redrive {
		if !slices.Contains(sent, j) {
			extra = append(extra, j)
		}
	}
	for _, j := range sent {
		if !slices.Contains(r.Redrive, j) {
			unsent = append(unsent, j)
		}
	}
	if len(extra)+len(unsent) > 0 {
		a.add(a.at(r, Mismatch{Kind: KindMismatch, Field: "header " + bus.MetaRedriveJobs, Recorded: strings.Join(extra, ","), Derived: strings.Join(unsent, ","),
			Detail: "the redrive's first request names jobs its requests do not send again (recorded), or omits jobs they send (derived)"}))
	}
}

// isRedriveRequest reports whether r is a render request of `tribunal redrive`: an
// attempt above 0 and, by design, no causing event (client.Redrive publishes it from
// the job record, not from an event).
func isRedriveRequest(r *Recorded) bool {
	if r.History || !r.OK() || r.DeadLetter != "" || r.Event.Attempt == 0 || r.Event.CausationID != "" {
		return false
	}
	_, ok := r.Event.Payload.(*events.RenderRequested)
	return ok
}

// documentOf reads a document a looping job's state is read with (a view's rubric) from
// blob storage, through its digest check, once per blob.
func (a *auditor) documentOf(tenant string, b events.Blob) ([]byte, error) {
	key := tenant + "/" + b.SHA256
	if c, ok := a.documents[key]; ok {
		return c.data, c.err
	}
	if a.store == nil {
		return nil, errors.New("read a view's document: the audit was given no blob store")
	}
	ctx, cancel := a.blobContext()
	defer cancel()
	data, _, err := blob.ReadAll(ctx, a.store, blob.Ref{Tenant: tenant, SHA256: b.SHA256})
	if err != nil {
		err = fmt.Errorf("read %s: %w", b.SHA256, err)
	}
	a.documents[key] = cachedDocument{data, err}
	return data, err
}

type cachedDocument struct {
	data []byte
	err  error
}

// claim stands for the aggregator's key-value race that picks the first sign-off of an
// interactive batch. The race leaves no event of its own, so the recorded decision that
// waits for a person names the winner; with none recorded, the first sign-off in stream
// order wins.
func (a *auditor) claim(tenant, batch, job string) string {
	holder := a.ahead.claimHolder(batchKey{tenant, batch}, job)
	if !a.claimNoted[batchKey{tenant, batch}] {
		a.claimNoted[batchKey{tenant, batch}] = true
		a.note(batchKey{tenant, batch}, "which sign-off of the interactive batch waits for a person", "a key-value race decides it; taken from the recorded decision")
	}
	return holder
}

// revisions expects the announcement of each audited batch's latest revision by people's
// late reviews (rulebook.RevisionEvents of the completion the header must keep), from the
// review whose replay made it. Only the latest is re-derivable: two reviews handled at
// once may each fold the other's outcome in or not, whatever order the stream holds them
// in, so an earlier revision's announcement is accepted when it names, as its reviser, a
// review of the batch that decided an outcome. Its id hashes what it says
// (events.ManifestEmitted.Step), so one whose contents were altered is still found
// (structure).
func (a *auditor) revisions() {
	var bks []batchKey
	for bk, b := range a.batches {
		if b.revisedFrom != nil || len(b.deciding) > 0 {
			bks = append(bks, bk)
		}
	}
	sort.Slice(bks, func(i, j int) bool { return bks[i].tenant+"/"+bks[i].batch < bks[j].tenant+"/"+bks[j].batch })
	for _, bk := range bks {
		b := a.batches[bk]
		if b.revisedFrom == nil || b.completion == nil || b.completion.Revised == nil {
			continue
		}
		for _, e := range rulebook.RevisionEvents(bk.tenant, bk.batch, b.completion) {
			a.expect(expectation{ev: e, from: *b.revisedFrom, what: describe(e)})
		}
	}
}

// earlierRevision reports whether r is the announcement of an earlier revision of its
// batch (see revisions), accepted unexplained.
func (a *auditor) earlierRevision(r *Recorded) bool {
	m, ok := r.Event.Payload.(*events.ManifestEmitted)
	b := a.batches[batchKey{r.Event.Tenant, r.Event.BatchID}]
	return ok && m.RevisedBy != "" && b != nil && b.deciding[m.RevisedBy]
}

// submittedAt records that the job at place p was submitted at stream sequence seq.
func (a *auditor) submittedAt(p rulebook.Place, seq uint64) {
	a.submitted.Grow(int(p) + 1)
	a.submitted.Set(int(p), seq)
}
