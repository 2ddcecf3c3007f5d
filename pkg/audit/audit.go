package audit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// blobTimeout bounds one blob read of the audit.
const blobTimeout = 30 * time.Second

// maxIndexFindings bounds the "no job.submitted for index" findings of one batch.
const maxIndexFindings = 20

// Audit re-derives every decision of the replayed batches from their recorded events
// alone and reports each value that differs from what the stream (or blob storage)
// records. It runs the aggregator's own rules (pkg/rulebook, in memory) in stream order:
// every kind's derivation, blocked jobs, loop steps and sign-offs (folding each view's
// loop across the replayed batches), batch completion, the digest chains, and every
// manifest, rebuilt and compared with the stored blob.
//
// store is read for two things only: the rubric a view is judged against (its verdicts
// cannot be normalized without it) and the stored manifests. Both are verified against
// their content address on read, so an altered manifest is reported as unreadable.
func Audit(recorded []Recorded, store blob.Store) Report {
	a := &auditor{
		ctx: context.Background(), store: store,
		byID: map[string][]*Recorded{}, claimed: map[*Recorded]bool{}, audited: map[batchKey]bool{},
		batches: map[batchKey]*simBatch{}, rubrics: map[string]cachedRubric{}, deferred: map[jobKey][]*Recorded{},
		noted: map[string]bool{}, claimNoted: map[batchKey]bool{}, planUnread: map[batchKey]bool{},
	}
	a.mem = &rulebook.Memory{LoadRubric: a.rubricOf, Claim: a.claim, LoadPlan: a.planOf}
	// A rejudge's events (another model judging the stored gated artifacts) stand next
	// to the decisions without changing any: they are counted, not simulated.
	kept := recorded[:0:0]
	rejudges := 0
	for _, r := range recorded {
		if r.OK() && r.Event.Rejudge != "" {
			rejudges++
			continue
		}
		kept = append(kept, r)
	}
	a.run(kept)
	a.rep.Rejudges = rejudges
	return a.rep
}

type auditor struct {
	ctx   context.Context
	store blob.Store
	recs  []*Recorded
	rep   Report
	// byID indexes the decodable, non-dead-letter messages by event id.
	byID    map[string][]*Recorded
	claimed map[*Recorded]bool
	audited map[batchKey]bool

	// mem runs the aggregator's rules over the replay.
	mem        *rulebook.Memory
	batches    map[batchKey]*simBatch
	rubrics    map[string]cachedRubric
	expects    []expectation
	deferred   map[jobKey][]*Recorded
	noted      map[string]bool
	claimNoted map[batchKey]bool
	// planUnread are batches whose cancel could not be followed over their plan (no blob
	// store, or an unreadable page): their cancel's steps are noted, not judged.
	planUnread map[batchKey]bool
}

func (a *auditor) run(recorded []Recorded) {
	a.recs = make([]*Recorded, len(recorded))
	for i := range recorded {
		a.recs[i] = &recorded[i]
	}
	sort.SliceStable(a.recs, func(i, j int) bool { return a.recs[i].Seq < a.recs[j].Seq })
	a.rep.Mismatches = []Mismatch{}
	a.index()
	a.structure()
	a.simulate()
	for _, e := range a.expects {
		if e.from != nil && !e.from.History && a.audited[batchKey{e.ev.Tenant, e.ev.BatchID}] {
			a.check(e)
		}
	}
	a.completions()
	a.unexplained()
	a.outcomes()
	a.services()
	a.rep.derived = map[jobKey]*records.Job{}
	a.rep.refs = map[string]EventRef{}
	for id, rs := range a.byID {
		if len(rs) > 0 {
			a.rep.refs[id] = EventRef{ID: id, Type: rs[0].Event.Type, Seq: rs[0].Seq}
		}
	}
	for bk := range a.audited {
		for _, j := range a.mem.Jobs(bk.tenant, bk.batch) {
			a.rep.derived[jobKey{j.Tenant, j.Batch, j.ACID}] = j
		}
	}
	sort.SliceStable(a.rep.Mismatches, func(i, j int) bool {
		x, y := a.rep.Mismatches[i], a.rep.Mismatches[j]
		if x.Batch != y.Batch {
			return x.Batch < y.Batch
		}
		return x.Seq < y.Seq
	})
}

// index counts the replay and reports what does not decode.
func (a *auditor) index() {
	undecodable := map[string]bool{}
	for _, r := range a.recs {
		if r.History {
			a.rep.History++
			if r.OK() && r.DeadLetter == "" {
				a.byID[r.Event.ID] = append(a.byID[r.Event.ID], r)
			}
			continue
		}
		a.rep.Events++
		if !r.OK() {
			if undecodable[r.SHA256] {
				continue // a dead letter of a message already reported
			}
			undecodable[r.SHA256] = true
			tenant, batch := peekEnvelope(r.Raw)
			detail := r.Err.Error()
			if r.DeadLetter != "" {
				detail = "dead letter of " + r.DeadLetter + ": " + detail
			}
			a.add(Mismatch{Kind: KindUndecodable, Tenant: tenant, Batch: batch, EventID: r.MsgID, Seq: r.Seq,
				Field: "subject " + r.Subject, Detail: detail})
			continue
		}
		a.audited[batchKey{r.Event.Tenant, r.Event.BatchID}] = true
		if r.DeadLetter == "" {
			a.byID[r.Event.ID] = append(a.byID[r.Event.ID], r)
		}
	}
	for bk, b := range a.batchesAwaiting() {
		a.batch(bk).awaiting = b
	}
	for _, r := range a.recs {
		if isRedriveRequest(r) {
			b := a.batch(batchKey{r.Event.Tenant, r.Event.BatchID})
			if !contains(b.redrives[r.Event.Attempt], r.Event.JobID) {
				b.redrives[r.Event.Attempt] = append(b.redrives[r.Event.Attempt], r.Event.JobID)
			}
		}
	}
}

// batchesAwaiting lists, per batch, the jobs whose recorded decision waits for a person.
func (a *auditor) batchesAwaiting() map[batchKey][]string {
	out := map[batchKey][]string{}
	for _, r := range a.recs {
		if r.History || !r.OK() || r.DeadLetter != "" {
			continue
		}
		p, ok := r.Event.Payload.(*events.IterationDecided)
		if !ok || p.Status != events.StatusAwaitingSpotcheck {
			continue
		}
		bk := batchKey{r.Event.Tenant, r.Event.BatchID}
		if !contains(out[bk], r.Event.JobID) {
			out[bk] = append(out[bk], r.Event.JobID)
			if len(out[bk]) == 2 {
				a.add(Mismatch{Kind: KindDuplicate, Tenant: bk.tenant, Batch: bk.batch, Job: r.Event.JobID, EventID: r.Event.ID,
					EventType: r.Event.Type, Seq: r.Seq, Field: "status",
					Detail: "a second sign-off waits for a person in one interactive batch (the first was " + out[bk][0] + ")"})
			}
		}
	}
	return out
}

// structure checks each audited event on its own: subject, deterministic id, message id,
// and duplicates of one logical step. A redrive attempt is a step of its own: its events
// repeat the first pass's types and iterations under ids of the attempt
// (events.AttemptStep), so both the id and the duplicate key include it.
func (a *auditor) structure() {
	type stepKey struct {
		t                  events.Type
		tenant, batch, job string
		iteration          int
		step               string
	}
	first := map[stepKey]*Recorded{}
	gated := map[stepKey]*Recorded{}
	for _, r := range a.recs {
		if r.History || !r.OK() || r.DeadLetter != "" {
			continue
		}
		ev := r.Event
		if tenant, typ, err := events.ParseSubject(r.Subject); err != nil || tenant != ev.Tenant || typ != ev.Type {
			a.add(a.at(r, Mismatch{Kind: KindSubject, Field: "subject", Recorded: r.Subject,
				Derived: events.SubjectRoot + "." + ev.Tenant + "." + string(ev.Type), Detail: "the services refuse an event whose subject contradicts its envelope"}))
		}
		steps := idSteps(ev)
		step, ok := "", false
		for _, s := range steps {
			s = events.AttemptStep(s, ev.Attempt)
			if events.NewID(ev.Type, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, s) == ev.ID {
				step, ok = s, true
				break
			}
		}
		if !ok {
			step = events.AttemptStep(steps[0], ev.Attempt)
			a.add(a.at(r, Mismatch{Kind: KindID, Field: "envelope.id", Recorded: ev.ID,
				Derived: events.NewID(ev.Type, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, step),
				Detail:  "not the deterministic id of its step"}))
		}
		if r.MsgID != "" && r.MsgID != ev.ID {
			a.add(a.at(r, Mismatch{Kind: KindID, Field: "Nats-Msg-Id", Recorded: r.MsgID, Derived: ev.ID,
				Detail: "published under another message id than its event id, which deduplication relies on"}))
		}
		k := stepKey{ev.Type, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, step}
		if prev := first[k]; prev != nil {
			detail := fmt.Sprintf("same logical step as %s (seq %d)", prev.Event.ID, prev.Seq)
			if prev.Event.ID == ev.ID {
				detail = fmt.Sprintf("event id recorded twice (first at seq %d)", prev.Seq)
				if prev.SHA256 != r.SHA256 {
					detail += " with different contents"
				}
			}
			a.add(a.at(r, Mismatch{Kind: KindDuplicate, Detail: detail}))
		} else {
			first[k] = r
		}
		if ev.Type == events.TypeGatesDone || ev.Type == events.TypeGatesFailed {
			g := stepKey{"gates", ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, events.AttemptStep("", ev.Attempt)}
			if prev := gated[g]; prev != nil && prev.Event.Type != ev.Type {
				a.add(a.at(r, Mismatch{Kind: KindDuplicate, Detail: fmt.Sprintf("the gater decided this iteration twice: %s %s (seq %d) and %s",
					prev.Event.Type, prev.Event.ID, prev.Seq, ev.Type)}))
			} else if prev == nil {
				gated[g] = r
			}
		}
	}
}

// idSteps are the steps an event of this type may be published under (see events.New
// calls across the services).
func idSteps(ev events.Event) []string {
	switch p := ev.Payload.(type) {
	case *events.ManifestEmitted:
		return []string{string(p.Kind)}
	case *events.SpotcheckRecorded:
		if p.Approved {
			return []string{"approve"}
		}
		return []string{"reject-" + p.Dimension}
	case *events.ViewReset:
		return []string{events.ResetStep(p.Loop)}
	case *events.IterationDecided, *events.JobBlocked:
		return []string{"", "final"}
	case *events.BatchCancelRequested:
		return []string{events.CancelStep(p.Page)}
	}
	return []string{""}
}

// aggregatorInputs are the subjects the aggregator's consumer receives (besides dead
// letters).
var aggregatorInputs = func() map[events.Type]bool {
	m := map[events.Type]bool{}
	for _, t := range bus.ServiceInputs[bus.Aggregator] {
		m[t] = true
	}
	return m
}()

// isAggregatorInput reports whether the aggregator consumes r: a dead letter, or an event
// on one of its input subjects whose envelope matches the subject.
func isAggregatorInput(r *Recorded) bool {
	if r.DeadLetter != "" {
		return true
	}
	tenant, typ, err := events.ParseSubject(r.Subject)
	return err == nil && aggregatorInputs[typ] && tenant == r.Event.Tenant && typ == r.Event.Type
}

// simulate feeds the replay to the rebuilt aggregator in stream order, but for a job's
// cancel, which goes where the aggregator applied it (see cancelOrder).
func (a *auditor) simulate() {
	order := a.cancelOrder()
	for _, r := range a.recs {
		if !r.OK() {
			continue
		}
		if c := order.before(r); c != nil {
			a.simulateOne(c)
		}
		if order.held(r) {
			continue
		}
		a.simulateOne(r)
		if c := order.after(r); c != nil {
			a.simulateOne(c)
		}
	}
	var keys []jobKey
	for k, rs := range a.deferred {
		if len(rs) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return a.deferred[keys[i]][0].Seq < a.deferred[keys[j]][0].Seq })
	for _, k := range keys {
		r := a.deferred[k][0]
		if r.History || !a.audited[batchKey{k.tenant, k.batch}] {
			continue
		}
		a.add(a.at(r, Mismatch{Kind: KindMissing, Job: k.job, Field: "job.submitted",
			Detail: fmt.Sprintf("%d event(s) for a job whose submission is not recorded", len(a.deferred[k]))}))
	}
}

// simulateOne feeds one recorded event to the rebuilt aggregator, holding back an event
// that overtook its job's submission as the aggregator's retries do.
func (a *auditor) simulateOne(r *Recorded) {
	if isRedriveRequest(r) {
		a.redriveRequest(r)
		return
	}
	if !isAggregatorInput(r) {
		return
	}
	tenant, batch, job := rulebook.JobOf(r.Event)
	key := jobKey{tenant, batch, job}
	if _, ok := r.Event.Payload.(*events.JobSubmitted); ok {
		a.applyInput(r)
		a.flush(key)
		return
	}
	if len(a.deferred[key]) > 0 && r.DeadLetter == "" {
		a.deferred[key] = append(a.deferred[key], r) // keep the job's order
		return
	}
	if !a.applyInput(r) {
		a.deferred[key] = append(a.deferred[key], r)
	}
}

// flush applies the events that overtook their job's submission, as the aggregator's
// retries do once the job is recorded.
func (a *auditor) flush(key jobKey) {
	pending := a.deferred[key]
	delete(a.deferred, key)
	for i, r := range pending {
		if !a.applyInput(r) {
			a.deferred[key] = pending[i:]
			return
		}
	}
}

func (a *auditor) expect(e expectation) { a.expects = append(a.expects, e) }

// check compares one expected aggregator output with the recorded event of its id.
func (a *auditor) check(e expectation) {
	var rec *Recorded
	collided := false
	for _, r := range a.byID[e.ev.ID] {
		if a.claimed[r] || r.Event.Type != e.ev.Type {
			collided = collided || a.claimed[r]
			continue
		}
		rec = r
		break
	}
	m := Mismatch{Tenant: e.ev.Tenant, Batch: e.ev.BatchID, Job: e.ev.JobID, EventID: e.ev.ID, EventType: e.ev.Type}
	if e.from != nil {
		m.FromID, m.FromType, m.FromSeq = e.from.Event.ID, e.from.Event.Type, e.from.Seq
	}
	if rec == nil {
		m.Kind, m.Field = KindMissing, string(e.ev.Type)
		m.Detail = fmt.Sprintf("the %s re-derived from the events is not recorded", e.what)
		if collided {
			m.Kind = KindCollision
			m.Detail = fmt.Sprintf("the %s was published under id %s, which an earlier event of the job already holds, so the stream dropped it as a duplicate", e.what, e.ev.ID)
		}
		a.add(m)
		return
	}
	a.claimed[rec] = true
	a.rep.Decisions++
	m.EventID, m.Seq = rec.Event.ID, rec.Seq
	if rec.Event.CausationID != e.ev.CausationID {
		a.add(with(m, KindMismatch, "envelope.cause", rec.Event.CausationID, e.ev.CausationID))
	}
	if rec.Event.CorrelationID != e.ev.CorrelationID {
		a.add(with(m, KindMismatch, "envelope.corr", rec.Event.CorrelationID, e.ev.CorrelationID))
	}
	diffs, err := diffMsgpack(rec.Event.Payload, e.ev.Payload, e.skip...)
	if err != nil {
		a.add(with(m, KindMismatch, "data", "", "").withDetail(err.Error()))
	}
	for _, d := range diffs {
		a.add(with(m, KindMismatch, d.path, d.recorded, d.derived))
	}
	if e.from != nil && rec.Seq < e.from.Seq {
		o := m
		o.Kind, o.Detail = KindOrder, fmt.Sprintf("recorded at seq %d, before the event it derives from (seq %d)", rec.Seq, e.from.Seq)
		a.add(o)
	}
}

func with(m Mismatch, k Kind, field, recorded, derived string) Mismatch {
	m.Kind, m.Field, m.Recorded, m.Derived = k, field, recorded, derived
	return m
}

func (m Mismatch) withDetail(d string) Mismatch {
	m.Detail = d
	return m
}

// outputTypes are the events only the aggregator publishes.
var outputTypes = map[events.Type]bool{
	events.TypeIterationDecided: true, events.TypeJobBlocked: true, events.TypeSignoffRecorded: true,
	events.TypeManifestEmitted: true, events.TypeBatchCompleted: true, events.TypeJobCancelRequested: true,
}

// isOutput reports whether only the aggregator publishes r: an output type, a render
// request but a redrive's (`tribunal redrive` publishes those, isRedriveRequest), or a
// cancel's continuation to the next plan page (the client asks for page 0 only).
func isOutput(r *Recorded) bool {
	switch p := r.Event.Payload.(type) {
	case *events.RenderRequested:
		return !isRedriveRequest(r)
	case *events.BatchCancelRequested:
		return p.Page > 0
	}
	return outputTypes[r.Event.Type]
}

// unexplained reports recorded aggregator outputs that no replayed input derives.
func (a *auditor) unexplained() {
	for _, r := range a.recs {
		if r.History || !r.OK() || r.DeadLetter != "" || a.claimed[r] {
			continue
		}
		if !isOutput(r) || a.planUnread[batchKey{r.Event.Tenant, r.Event.BatchID}] && isCancel(r) {
			continue
		}
		a.add(a.at(r, Mismatch{Kind: KindUnexplained, Detail: "no replayed event derives it"}))
	}
}

// outcomes reports the audited jobs the events leave without a final outcome, and the
// batch positions nothing was submitted for.
func (a *auditor) outcomes() {
	var subs []*Recorded
	for bk, b := range a.batches {
		if !a.audited[bk] {
			continue
		}
		for _, r := range b.submitted {
			if !r.History {
				subs = append(subs, r)
			}
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Seq < subs[j].Seq })
	for _, r := range subs {
		j := a.jobOf(jobKey{r.Event.Tenant, r.Event.BatchID, r.Event.JobID})
		if j == nil || j.Final() {
			continue
		}
		detail := "the recorded events leave the job " + string(j.Status)
		if j.Status == events.StatusAwaitingSpotcheck {
			detail += " (its sign-off waits for a person)"
		}
		a.add(a.at(r, Mismatch{Kind: KindMissing, Field: "outcome", Detail: detail}))
	}
	var bks []batchKey
	for bk := range a.audited {
		bks = append(bks, bk)
	}
	sort.Slice(bks, func(i, j int) bool { return bks[i].tenant+"/"+bks[i].batch < bks[j].tenant+"/"+bks[j].batch })
	for _, bk := range bks {
		b := a.batch(bk)
		jobs := a.mem.Jobs(bk.tenant, bk.batch)
		sum := BatchSummary{Tenant: bk.tenant, Batch: bk.batch, Jobs: len(jobs), Complete: len(b.completions) > 0}
		a.rep.Jobs += len(jobs)
		have := map[int]bool{}
		for _, j := range jobs {
			have[j.Index] = true
		}
		missing := 0
		for i := 0; i < b.size; i++ {
			if !have[i] {
				missing++
				if missing <= maxIndexFindings {
					a.add(Mismatch{Kind: KindMissing, Tenant: bk.tenant, Batch: bk.batch, Field: "job.submitted",
						Detail: fmt.Sprintf("no job.submitted for index %d of %d", i, b.size)})
				}
			}
		}
		if n := len(b.completions); n > 0 {
			sum.Digest, sum.Summary, sum.Attempt = b.digest, b.summary, b.completions[n-1].Attempt
		}
		a.rep.Batches = append(a.rep.Batches, sum)
	}
}

// at fills a mismatch's location from a recorded event.
func (a *auditor) at(r *Recorded, m Mismatch) Mismatch {
	ev := r.Event
	m.Tenant, m.Batch, m.EventID, m.EventType, m.Seq = ev.Tenant, ev.BatchID, ev.ID, ev.Type, r.Seq
	if m.Job == "" {
		m.Job = ev.JobID
	}
	return m
}

func (a *auditor) add(m Mismatch) { a.rep.Mismatches = append(a.rep.Mismatches, m) }

// unverified notes, once per batch and subject, what could not be re-derived.
func (a *auditor) unverified(r *Recorded, what, why string) {
	if r.History {
		return
	}
	ev := r.Event
	key := ev.Tenant + "/" + ev.BatchID + "/" + what + "/" + why
	if a.noted[key] {
		return
	}
	a.noted[key] = true
	a.rep.Unverified = append(a.rep.Unverified, Unverified{Tenant: ev.Tenant, Batch: ev.BatchID, Job: ev.JobID, What: what, Why: why})
}

func (a *auditor) blobContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.ctx, blobTimeout)
}

func (a *auditor) readBlob(tenant, sha string) ([]byte, error) {
	if a.store == nil {
		return nil, errors.New("no blob store given to the audit")
	}
	ctx, cancel := a.blobContext()
	defer cancel()
	data, _, err := blob.ReadAll(ctx, a.store, blob.Ref{Tenant: tenant, SHA256: sha})
	return data, err
}

// services re-runs what the gater decided deterministically: each kind's gates
// (kind.Kind.Gate) over the recorded render, reading the artifacts back from blob storage,
// compared with the recorded gates.done or gates.failed: the blind placement of the slots,
// the routing of a blocked render, and whether every artifact is still the one rendered.
// A looping kind's gates also read its view's state, which the stream does not hold.
func (a *auditor) services() {
	// itKey is one pass of a job through the pipeline: a redrive attempt renders and
	// gates the same iteration again.
	type itKey struct {
		job       jobKey
		iteration int
		attempt   int
	}
	rendered := map[itKey]*Recorded{}
	env := &kind.GateEnv{Store: a.store}
	for _, r := range a.recs {
		if r.History || !r.OK() || r.DeadLetter != "" {
			continue
		}
		ev := r.Event
		key := itKey{jobKey{ev.Tenant, ev.BatchID, ev.JobID}, ev.Iteration, ev.Attempt}
		switch ev.Payload.(type) {
		case *events.RenderDone:
			if rendered[key] == nil {
				rendered[key] = r
			}
			continue
		case *events.GatesDone, *events.GatesFailed:
		default:
			continue
		}
		rd := rendered[key]
		if rd == nil {
			continue
		}
		done := rd.Event.Payload.(*events.RenderDone)
		var derived events.Payload
		if done.Blocked != "" {
			derived = &events.GatesFailed{Kind: done.Spec.Kind, ACID: done.Spec.ACID, Blocked: done.Blocked}
		} else {
			k, err := kinds.Lookup(done.Spec.Kind)
			if err != nil {
				continue
			}
			if _, looping := k.(kind.Looping); looping {
				a.unverified(r, "the gates of a looping view", "they read the view's previous render and baseline, which the stream does not hold")
				continue
			}
			if a.store == nil {
				a.note(batchKey{ev.Tenant, ev.BatchID}, "the gates and the artifacts they read", "the audit was given no blob store")
				continue
			}
			ctx, cancel := a.blobContext()
			derived, err = k.Gate(ctx, env, rd.Event, done)
			cancel()
			if err != nil {
				a.unverified(r, "the gates", err.Error())
				continue
			}
		}
		a.rep.Decisions++
		if derived.EventType() != ev.Type {
			a.add(a.from(a.at(r, with(Mismatch{}, KindMismatch, "type", string(ev.Type), string(derived.EventType())).
				withDetail("the gates re-run over the recorded render (and the artifacts as stored now) decide otherwise")), rd))
			continue
		}
		diffs, err := diffMsgpack(ev.Payload, derived)
		if err != nil {
			a.add(a.from(a.at(r, Mismatch{Kind: KindMismatch, Field: "gates", Detail: err.Error()}), rd))
			continue
		}
		for _, d := range diffs {
			a.add(a.from(a.at(r, with(Mismatch{}, KindMismatch, d.path, d.recorded, d.derived)), rd))
		}
	}
}

// compareTo counts one re-derivation of a value of r from the event from and reports
// each differing field.
func (a *auditor) compareTo(r, from *Recorded, recorded, derived any, field string) {
	a.rep.Decisions++
	diffs, err := diffMsgpack(map[string]any{field: recorded}, map[string]any{field: derived})
	if err != nil {
		a.add(a.from(a.at(r, Mismatch{Kind: KindMismatch, Field: field, Detail: err.Error()}), from))
		return
	}
	for _, d := range diffs {
		a.add(a.from(a.at(r, with(Mismatch{}, KindMismatch, d.path, d.recorded, d.derived)), from))
	}
}

func (a *auditor) from(m Mismatch, r *Recorded) Mismatch {
	m.FromID, m.FromType, m.FromSeq = r.Event.ID, r.Event.Type, r.Seq
	return m
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
