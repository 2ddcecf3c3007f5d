package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// auditState is what the replay derived that the aggregator's key-value state must agree
// with.
type auditState struct {
	mem     *rulebook.Memory
	audited map[batchKey]bool
	batches map[batchKey]*simBatch
	// steps and types name the recorded events by id (JobDecisions).
	steps stepTable
	types []events.Type
	// store reads back the blobs the state names (the batch index).
	store blob.Store
	// again is what a second read derived of the batches it audited again (RunWith),
	// which this state's derivation of them does not stand for.
	again *auditState
}

// of is what the replay derived of batch bk: the second read's, for a batch it
// audited again.
func (st *auditState) of(bk batchKey) *auditState {
	if st.again != nil && st.again.audited[bk] {
		return st.again
	}
	return st
}

// ref names a recorded event by id: its type and where the stream holds it.
func (st *auditState) ref(id, sha string) EventRef {
	ref := EventRef{ID: id, SHA256: sha}
	if s, ok := st.steps.get(keyOf(id)); ok {
		ref.Seq = s.seq()
		if int(s.typ()) < len(st.types) {
			ref.Type = st.types[s.typ()]
		}
	}
	return ref
}

// maxStateFindings bounds the "no record" findings of one batch's state.
const maxStateFindings = 20

// CheckBatchState compares an audited batch's aggregator state, read from the key-value
// buckets with the services' credentials, with what the replay re-derived, and adds each
// difference to the report: the batch header (size, source, plan, cancel, completion
// with its summary, digest, attempt, manifests, kinds and judges, the redrive in
// progress) and every job record, read one at a time (records.Store.EachJob) and
// compared field by field. The batch's index, a read model built from the same records,
// is read back through its digest check (it must exist and be intact), not rebuilt. The
// state is the second witness: readers (`tribunal results`, the console) believe it, so a header
// or record that disagrees with the events is reported, a missing one too; a job record
// keeps the links of the events its outcome was derived from, so an event whose bytes
// changed after the decision is named exactly.
//
// A batch the replay holds no event of is not compared field by field: its header is one
// finding (the stream no longer proves anything the header says), its job records are
// counted in it.
func CheckBatchState(ctx context.Context, rep *Report, st records.Store, tenant, batch string) error {
	h, _, err := st.Header(ctx, tenant, batch)
	if err != nil {
		return err
	}
	return checkBatchState(ctx, rep, st, h, tenant, batch, "")
}

// checkBatchState is CheckBatchState over the header h read already; hint explains, for
// a batch the replay holds no event of, where its events may have gone.
func checkBatchState(ctx context.Context, rep *Report, st records.Store, h *records.Batch, tenant, batch, hint string) error {
	c := newStateCheck(ctx, rep, tenant, batch)
	c.hint = hint
	c.header(h)
	if err := st.EachJob(ctx, tenant, batch, func(j *records.Job) error { c.job(j); return nil }); err != nil {
		return err
	}
	c.finish()
	return nil
}

// CheckUnreplayed finds what a replay cannot see by itself: the header of a batch the
// stream holds no event of (every event deleted, or aged out of the stream's retention)
// while the key-value state still says what was decided. f.BatchID names the batch and
// f.Tenant its tenant (every tenant's header of that batch when ""); each such header is
// reported by CheckBatchState, as a batch the replay did not reach. Batches the replay
// audited are left to CheckBatchState. It returns how many headers it reported.
func CheckUnreplayed(ctx context.Context, rep *Report, js jetstream.JetStream, f Filter, st records.Store) (int, error) {
	if f.BatchID == "" {
		return 0, errors.New("audit: the headers of a batch without events are looked up by batch id")
	}
	tenants := []string{f.Tenant}
	if f.Tenant == "" {
		var err error
		if tenants, err = headerTenants(ctx, st, f.BatchID); err != nil {
			return 0, err
		}
	}
	audited := map[batchKey]bool{}
	if rep.state != nil {
		audited = rep.state.audited
	}
	n := 0
	for _, tenant := range tenants {
		if audited[batchKey{tenant, f.BatchID}] {
			continue
		}
		h, _, err := st.Header(ctx, tenant, f.BatchID)
		if err != nil {
			return n, err
		}
		if h == nil {
			continue
		}
		hint, err := whereEventsWent(ctx, js, f.Stream, h)
		if err != nil {
			return n, err
		}
		if err := checkBatchState(ctx, rep, st, h, tenant, f.BatchID, hint); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// headerTenants lists the tenants whose batches bucket holds a header of batch.
func headerTenants(ctx context.Context, st records.Store, batch string) ([]string, error) {
	l, err := st.Batches.ListKeysFiltered(ctx, records.BatchKey("*", batch))
	if err != nil {
		return nil, fmt.Errorf("audit: list the headers of batch %s: %w", batch, err)
	}
	defer func() { _ = l.Stop() }()
	var out []string
	for k := range l.Keys() {
		if tenant, ok := strings.CutSuffix(k, "."+batch); ok {
			out = append(out, tenant)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("audit: list the headers of batch %s: %w", batch, err)
	}
	slices.Sort(out)
	return out, nil
}

// whereEventsWent says, for a finding about a header without events, whether the stream
// could have let them age out: it holds nothing, or nothing as old as the batch.
func whereEventsWent(ctx context.Context, js jetstream.JetStream, stream string, h *records.Batch) (string, error) {
	if stream == "" {
		stream = DefaultStream
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", fmt.Errorf("audit: open stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("audit: stream %s info: %w", stream, err)
	}
	switch {
	case info.State.Msgs == 0:
		return " (the stream holds no event at all)", nil
	case !h.CreatedAt.IsZero() && info.State.FirstTime.After(h.CreatedAt):
		return fmt.Sprintf(" (the stream's oldest event was stored at %s, after the batch was created at %s: the batch's events were deleted, or aged out of the stream's retention)",
			info.State.FirstTime.UTC().Format(time.RFC3339), h.CreatedAt.UTC().Format(time.RFC3339)), nil
	}
	return "", nil
}

// CheckState is CheckBatchState over a header and job records read already (h nil: the
// state holds no header of the records' batch).
func CheckState(rep *Report, h *records.Batch, recs []*records.Job) {
	var c *stateCheck
	switch {
	case h != nil:
		c = newStateCheck(context.Background(), rep, h.Tenant, h.Batch)
	case len(recs) > 0:
		c = newStateCheck(context.Background(), rep, recs[0].Tenant, recs[0].Batch)
	default:
		return
	}
	c.header(h)
	for _, j := range recs {
		c.job(j)
	}
	c.finish()
}

// stateCheck compares one batch's state with the replay, in one pass over the state's
// job records, each compared with its re-derived record read back by key
// (rulebook.Memory.JobPlace); what it keeps of a job is the bit of its place that says it
// was met, so that the jobs the state holds no record of are found without reading
// every re-derived record a second time.
type stateCheck struct {
	ctx context.Context
	rep *Report
	st  *auditState
	bk  batchKey
	// seen are the places (rulebook.Place) of the batch's jobs whose record the state
	// holds, a bit each.
	seen []uint64
	// unreplayed is the index in rep.Mismatches of the finding of a header the replay
	// holds no event of (-1: none), orphans the job records counted in it, hint what it
	// says last, of where the events went.
	unreplayed int
	orphans    int
	hint       string
}

func newStateCheck(ctx context.Context, rep *Report, tenant, batch string) *stateCheck {
	st := rep.state
	if st == nil {
		st = &auditState{mem: &rulebook.Memory{}, audited: map[batchKey]bool{}, batches: map[batchKey]*simBatch{}}
	}
	st = st.of(batchKey{tenant, batch})
	return &stateCheck{ctx: ctx, rep: rep, st: st, bk: batchKey{tenant, batch}, unreplayed: -1}
}

func (c *stateCheck) add(m Mismatch) { c.rep.Mismatches = append(c.rep.Mismatches, m) }

// header compares the batch header.
func (c *stateCheck) header(h *records.Batch) {
	base := Mismatch{Tenant: c.bk.tenant, Batch: c.bk.batch, EventType: "batch header"}
	derived := c.st.mem.Header(c.bk.tenant, c.bk.batch)
	if !c.st.audited[c.bk] {
		derived = nil
	}
	var comp *records.Completion
	if b := c.st.batches[c.bk]; b != nil && derived != nil {
		comp = b.completion
	}
	if h == nil {
		if derived != nil {
			c.add(with(base, KindMissing, "header", "", "").
				withDetail("the key-value state holds no header of a batch the events submit"))
		}
		return
	}
	if !c.st.audited[c.bk] {
		// Readers believe the header (`tribunal results` reads its completion), and not
		// one event is left to prove it: every one was deleted, or aged out.
		c.unreplayed = len(c.rep.Mismatches)
		c.add(with(base, KindMissing, "", "", "").
			withDetail(fmt.Sprintf("batch %s: the header says %s but the stream holds no event of it", c.bk.batch, headerSays(h))))
		return
	}
	c.rep.Decisions++
	if derived != nil {
		if h.Size != derived.Size {
			c.add(with(base, KindMismatch, "size", fmt.Sprint(h.Size), fmt.Sprint(derived.Size)))
		}
		if h.Source != derived.Source {
			c.add(with(base, KindMismatch, "source", h.Source, derived.Source))
		}
		c.redrive(base, h.Redrive, derived.Redrive)
		c.diff(base, "plan", h.Plan, derived.Plan)
		c.cancel(base, h.Cancel, derived.Cancel)
	}
	switch {
	case h.Completion == nil && comp != nil:
		c.add(with(base, KindMissing, "completion", "", fmt.Sprintf("attempt %d, digest %s", comp.Attempt, comp.Digest)).
			withDetail("the batch header records no completion, but the events complete the batch: whoever reads the state is told it is still running"))
	case h.Completion != nil && comp == nil:
		c.add(with(base, KindMissing, "completion", "complete", "").
			withDetail("the batch header records a completion the replayed events do not reach"))
	case h.Completion != nil:
		hc := h.Completion
		if hc.Attempt != comp.Attempt {
			c.add(with(base, KindMismatch, "completion.attempt", fmt.Sprint(hc.Attempt), fmt.Sprint(comp.Attempt)).
				withDetail("the header's completion is not that of the last redrive the replayed events complete"))
		}
		if hc.Digest != comp.Digest {
			c.add(with(base, KindMismatch, "completion.digest", hc.Digest, comp.Digest))
		}
		if !hc.At.Equal(comp.At) {
			c.add(with(base, KindMismatch, "completion.at", hc.At.String(), comp.At.String()))
		}
		c.diff(base, "completion.summary", &hc.Summary, &comp.Summary)
		c.diff(base, "completion.manifests", hc.Manifests, comp.Manifests)
		c.diff(base, "completion.manifest", hc.ManifestRef, comp.ManifestRef)
		c.diff(base, "completion.kinds", hc.Kinds, comp.Kinds)
		c.diff(base, "completion.judges", hc.Judges, comp.Judges)
		c.diff(base, "completion.cost", hc.Cost, comp.Cost)
		c.diff(base, "completion.revised", hc.Revised, comp.Revised)
		c.diff(base, "completion.announced", hc.Announced, comp.Announced)
		c.index(base, hc.Index)
		if comp.Revised != nil {
			c.revisedManifests(base, hc.Manifests)
		}
	}
}

// revisedManifests reads back the manifests of a completion people's reviews revised
// through the store's digest check: their announcement (rulebook.RevisionEvents) is
// compared with the re-derived one but its manifest is not read back with it
// (auditor.checkManifest), and readers (`tribunal results`, the console) believe them. Their addresses were compared with the re-derived ones above.
func (c *stateCheck) revisedManifests(base Mismatch, refs map[events.Kind]events.Blob) {
	if c.st.store == nil {
		return // noted already: the audit was given no blob store
	}
	for _, k := range slices.Sorted(maps.Keys(refs)) {
		ref := refs[k]
		ctx, cancel := context.WithTimeout(c.ctx, blobTimeout)
		attrs, err := readThrough(ctx, c.st.store, blob.Ref{Tenant: c.bk.tenant, SHA256: ref.SHA256})
		cancel()
		field := "completion.manifests." + string(k)
		switch {
		case err != nil:
			c.add(with(base, KindUnreadable, field, ref.SHA256, "").
				withDetail(fmt.Sprintf("the %s manifest the reviews revised cannot be read back intact: %v", k, err)))
		case attrs.Size != ref.Size:
			c.add(with(base, KindMismatch, field+".size", fmt.Sprint(attrs.Size), fmt.Sprint(ref.Size)))
		case attrs.MediaType != ref.MediaType:
			c.add(with(base, KindMismatch, field+".media_type", attrs.MediaType, ref.MediaType).
				withDetail(fmt.Sprintf("the blob store keeps the revised %s manifest under another media type than the aggregator wrote", k)))
		default:
			c.rep.Decisions++
		}
	}
}

// cancel compares the batch's cancel: who asked, by which event. When is the
// aggregator's clock, which no event records.
func (c *stateCheck) cancel(base Mismatch, recorded, derived *records.Cancel) {
	show := func(x *records.Cancel) string {
		if x == nil {
			return ""
		}
		return fmt.Sprintf("by %s, event %s", x.By, x.Event)
	}
	if s, d := show(recorded), show(derived); s != d {
		c.add(with(base, KindMismatch, "cancel", s, d))
	}
}

// index reads the batch's index back through the store's digest check: the console
// believes it for every page of the batch. Its entries are a read model of the job
// records (compared one by one), so it is not rebuilt.
func (c *stateCheck) index(base Mismatch, ref *events.Blob) {
	if ref == nil {
		return
	}
	if c.st.store == nil {
		return // noted already: the audit was given no blob store
	}
	ctx, cancel := context.WithTimeout(c.ctx, blobTimeout)
	defer cancel()
	attrs, err := readThrough(ctx, c.st.store, blob.Ref{Tenant: c.bk.tenant, SHA256: ref.SHA256})
	switch {
	case err != nil:
		c.add(with(base, KindUnreadable, "completion.index", ref.SHA256, "").
			withDetail("the batch's index cannot be read back intact: " + err.Error()))
	case attrs.Size != ref.Size:
		c.add(with(base, KindMismatch, "completion.index.size", fmt.Sprint(attrs.Size), fmt.Sprint(ref.Size)))
	case ref.MediaType != index.MediaType:
		c.add(with(base, KindMismatch, "completion.index.media_type", ref.MediaType, index.MediaType))
	case attrs.MediaType != index.MediaType:
		c.add(with(base, KindMismatch, "completion.index.media_type", attrs.MediaType, index.MediaType).
			withDetail("the blob store keeps the batch's index under another media type than the aggregator wrote"))
	default:
		c.rep.Decisions++
	}
}

func (c *stateCheck) diff(base Mismatch, field string, recorded, derived any) {
	diffs, err := diffMsgpack(recorded, derived)
	if err != nil {
		c.add(with(base, KindMismatch, field, "", "").withDetail(err.Error()))
	}
	for _, d := range diffs {
		f := field
		if d.path != "" {
			f += "." + d.path
		}
		c.add(with(base, KindMismatch, f, d.recorded, d.derived))
	}
}

// redrive compares the redrive in progress: its attempt and the jobs it still waits for.
func (c *stateCheck) redrive(base Mismatch, recorded, derived *records.Redrive) {
	show := func(r *records.Redrive) string {
		if r == nil {
			return ""
		}
		p := slices.Clone(r.Pending)
		slices.Sort(p)
		return fmt.Sprintf("attempt %d, pending [%s]", r.Attempt, strings.Join(p, " "))
	}
	if s, d := show(recorded), show(derived); s != d {
		c.add(with(base, KindMismatch, "redrive", s, d))
	}
}

// headerSays is what a header claims of its batch, in a finding's words.
func headerSays(h *records.Batch) string {
	switch {
	case h.Completion != nil:
		return "complete"
	case h.Cancel != nil:
		return "cancelled"
	}
	return fmt.Sprintf("running (%d jobs)", h.Size)
}

// job compares one job record, field by field, with the replay's.
func (c *stateCheck) job(r *records.Job) {
	if c.unreplayed >= 0 {
		c.orphans++
		return
	}
	m := Mismatch{Tenant: r.Tenant, Batch: r.Batch, Job: r.ACID, EventType: "job record"}
	var derived []byte
	if c.st.audited[c.bk] {
		var p rulebook.Place
		var ok bool
		derived, p, ok = c.st.mem.JobPlace(r.Tenant, r.Batch, r.ACID)
		if r.Tenant != c.bk.tenant || r.Batch != c.bk.batch {
			// A record under this batch's keys that names another batch: what it says
			// is compared with that batch's job, and it stands for the job of its id here.
			_, p, ok = c.st.mem.JobPlace(c.bk.tenant, c.bk.batch, r.ACID)
		}
		if ok {
			c.see(p)
		}
	}
	if derived == nil {
		c.add(with(m, KindMissing, "job.submitted", "", "").withDetail("the aggregator holds a record of a job the replay never submits"))
		return
	}
	c.rep.Decisions++
	stored, err := json.Marshal(r)
	if err != nil {
		c.add(with(m, KindMismatch, "record", "", "").withDetail(err.Error()))
		return
	}
	if bytes.Equal(stored, derived) {
		return
	}
	// Inputs are compared link by link below. Held (the HE-2 hold's parked inputs) is
	// not compared: whether an input reached the rules just before or just after the
	// spot-check's answer is a race, which changes where it waited, never what it decided
	// (rulebook's Park), and what it decided is compared.
	//
	// A record written before positions were kept (records.Job.Positions) has none,
	// which the replay re-derives anyway: those are not compared. Any that it keeps
	// are, so a record that points its audit at other messages is a finding.
	skip := []string{"inputs", "held"}
	if len(r.Positions) == 0 {
		skip = append(skip, "positions")
	}
	diffs, err := diffJSON(stored, derived, skip...)
	if err != nil {
		c.add(with(m, KindMismatch, "record", "", "").withDetail(err.Error()))
	}
	for _, d := range diffs {
		c.add(with(m, KindMismatch, d.path, d.recorded, d.derived))
	}
	if d, err := records.DecodeJob(derived); err == nil {
		compareLinks(c.rep, m, r.Inputs, d.Inputs)
	}
}

// finish reports the jobs the events submit that the state holds no record of.
func (c *stateCheck) finish() {
	if c.unreplayed >= 0 {
		m := &c.rep.Mismatches[c.unreplayed]
		if c.orphans > 0 {
			m.Detail += fmt.Sprintf("; the state holds %d job records of it, which no event proves either", c.orphans)
		}
		m.Detail += c.hint
	}
	if !c.st.audited[c.bk] {
		return
	}
	missing := 0
	c.st.mem.EachPlace(c.bk.tenant, c.bk.batch, func(p rulebook.Place) {
		if c.saw(p) {
			return
		}
		missing++
		if missing <= maxStateFindings {
			j := c.st.mem.JobAt(p)
			c.add(Mismatch{Kind: KindMissing, Tenant: j.Tenant, Batch: j.Batch, Job: j.ACID, EventType: "job record", Field: "record",
				Detail: "the key-value state holds no record of a job the events submit"})
		}
	})
	if missing > maxStateFindings {
		c.add(Mismatch{Kind: KindMissing, Tenant: c.bk.tenant, Batch: c.bk.batch, EventType: "job record", Field: "record",
			Detail: fmt.Sprintf("and %d more jobs without a record", missing-maxStateFindings)})
	}
}

// see marks the job at place p as one the state holds a record of.
func (c *stateCheck) see(p rulebook.Place) {
	if w := int(p / 64); w >= len(c.seen) {
		c.seen = append(c.seen, make([]uint64, w+1-len(c.seen))...)
	}
	c.seen[p/64] |= 1 << (p % 64)
}

// saw reports whether see marked place p.
func (c *stateCheck) saw(p rulebook.Place) bool {
	return int(p/64) < len(c.seen) && c.seen[p/64]&(1<<(p%64)) != 0
}

// compareLinks names the event behind each differing link of a job's chain.
func compareLinks(rep *Report, m Mismatch, state, replay []string) {
	split := func(l string) (string, string) {
		for i := len(l) - 1; i >= 0; i-- {
			if l[i] == ':' {
				return l[:i], l[i+1:]
			}
		}
		return l, ""
	}
	n := max(len(state), len(replay))
	for i := 0; i < n; i++ {
		var s, r string
		if i < len(state) {
			s = state[i]
		}
		if i < len(replay) {
			r = replay[i]
		}
		if s == r {
			continue
		}
		sid, sdig := split(s)
		rid, rdig := split(r)
		x := m
		if sid == rid {
			x.EventID = sid
			x = with(x, KindMismatch, fmt.Sprintf("inputs[%d] sha256", i), sdig, rdig).
				withDetail("the event's bytes on the stream are not those the aggregator derived its decision from")
		} else {
			x.EventID = firstNonEmpty(sid, rid)
			x = with(x, KindMismatch, fmt.Sprintf("inputs[%d]", i), s, r).
				withDetail("the aggregator derived the job from other events than the stream holds")
		}
		rep.Mismatches = append(rep.Mismatches, x)
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
