package audit_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// fixture writes a stream as the services would: it publishes each input and records
// what the aggregator's own rules (rulebook.Memory) publish for it, completions and their
// manifests included, so an honest fixture must audit clean and each alteration shows
// what the audit catches.
type fixture struct {
	t     *testing.T
	store blob.Store
	// dir is the file store's folder ("" for another driver).
	dir           string
	tenant, batch string
	recs          []audit.Recorded
	agg           *rulebook.Memory
	at            time.Time
	// completion is the latest completion announced: what the batch header records.
	completion *records.Completion
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := fixtureStore
	if st == nil {
		var err error
		if st, err = fileblob.New(t.TempDir(), fileblob.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureOn(t, st)
	f.dir = st.Dir()
	return f
}

// fixtureBatch is the batch the fixtures judge, and fixtureStore, when set, the blob
// store they share: a test of several batches on one stream builds each with its own.
var (
	fixtureBatch = "b-1"
	fixtureStore *fileblob.Store
)

// newFixtureOn is a fixture over another blob store.
func newFixtureOn(t *testing.T, st blob.Store) *fixture {
	return &fixture{t: t, store: st, tenant: "team-a", batch: fixtureBatch, agg: &rulebook.Memory{}, at: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
}

func (f *fixture) publishOn(subject string, ev events.Event, msgID, reason string) audit.Recorded {
	f.t.Helper()
	data, err := events.Encode(ev)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.raw(subject, data, msgID, reason)
}

func (f *fixture) publish(ev events.Event) audit.Recorded {
	f.t.Helper()
	subject, err := events.Subject(ev.Tenant, ev.Type)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.publishOn(subject, ev, ev.ID, "")
}

func (f *fixture) raw(subject string, data []byte, msgID, reason string) audit.Recorded {
	r := audit.NewRecorded(uint64(len(f.recs)+1), subject, f.at.Add(time.Duration(len(f.recs))*time.Millisecond), data, msgID, reason)
	f.recs = append(f.recs, r)
	return r
}

// in publishes an aggregator input and what the aggregator's rules publish for it.
func (f *fixture) in(ev events.Event) audit.Recorded {
	f.t.Helper()
	r := f.publish(ev)
	f.apply(r, rulebook.Input{Event: ev, Link: link(r), Subject: r.Subject, Seq: r.Seq})
	return r
}

// deadLetter publishes ev as a service's dead letter and the aggregator's answer to it.
func (f *fixture) deadLetter(service string, ev events.Event, reason string) audit.Recorded {
	f.t.Helper()
	r := f.publishOn(events.DeadLetterSubject(service), ev, "dlq-"+service+"-"+ev.ID, reason)
	f.apply(r, rulebook.Input{Event: ev, Link: link(r), Seq: r.Seq, DeadLetter: &rulebook.DeadLetter{Service: service, Reason: reason}})
	return r
}

func (f *fixture) apply(r audit.Recorded, in rulebook.Input) {
	f.t.Helper()
	res, err := f.agg.Apply(in)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range res.Publish {
		f.publish(e)
	}
	if c := res.Complete; c != nil {
		f.announce(c.Fold(), c.By.ACID, c.Attempt)
	}
	if c := res.Revised; c != nil {
		// A late deciding review folded the batch again: the aggregator stores the
		// manifests and the header's new completion (its announcement is in Publish).
		for _, data := range c.Manifests {
			if _, err := blob.PutBytes(context.Background(), f.store, f.tenant, data, "application/json"); err != nil {
				f.t.Fatal(err)
			}
		}
		comp := c.Completion
		if comp.Announced == nil && f.completion != nil {
			// The header keeps what the completion announced when the batch finished.
			comp.Announced = f.completion.Announced
			if comp.Announced == nil {
				comp.Announced = &records.Announcement{Summary: f.completion.Summary, Manifests: f.completion.Manifests, Digest: f.completion.Digest}
			}
		}
		f.completion = &comp
	}
}

// announce stores a completion's manifests and publishes its events, as the aggregator's
// complete does.
func (f *fixture) announce(fold *rulebook.Fold, by string, attempt int) {
	f.t.Helper()
	c, err := fold.Complete(by, attempt)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, data := range c.Manifests {
		if _, err := blob.PutBytes(context.Background(), f.store, f.tenant, data, "application/json"); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, e := range rulebook.CompletionEvents(f.tenant, f.batch, &c.Completion) {
		f.publish(e)
	}
	f.completion = &c.Completion
}

func link(r audit.Recorded) string { return r.Event.ID + ":" + r.SHA256 }

func abSpec(id string) events.JobSpec {
	return events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "the notes are clear", KindPart: &ab.Spec{
		Ours: events.Source{Name: "ours/" + id + ".md", URL: "https://example.test/ours/" + id}, Reference: events.Source{Name: "ref/" + id + ".md", URL: "https://example.test/ref/" + id}, Threshold: 0.75}}
}

// abJob submits an ab job and records the judge's raw answer; the aggregator decides.
func (f *fixture) abJob(id string, index, size int, raw string, confidence float64) {
	spec := abSpec(id)
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: index, BatchSize: size}, f.tenant, f.batch, id, 0, "", nil)
	f.in(sub)
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok", RawWinner: raw, Confidence: confidence, BiggestGap: "the headings"}}
	f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", &sub.Envelope))
}

// deadLettered submits an ab job whose render request the renderer gave up on.
func (f *fixture) deadLettered(id string, index, size int) {
	spec := abSpec(id)
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: index, BatchSize: size}, f.tenant, f.batch, id, 0, "", nil)
	f.in(sub)
	req := f.recs[f.find(events.TypeRenderRequested, id)].Event
	f.deadLetter("renderer", req, "sensor crashed")
}

// forgeCompletion announces a completion of attempt over the jobs as they stand now,
// whether or not the rules would complete the batch: what a lying aggregator would write.
func (f *fixture) forgeCompletion(attempt int) {
	f.t.Helper()
	jobs := f.agg.Jobs(f.tenant, f.batch)
	fold := rulebook.NewFold(f.tenant, f.batch)
	for _, j := range jobs {
		fold.Add(j)
	}
	f.announce(fold, jobs[len(jobs)-1].ACID, attempt)
}

// redrive sends the blocked job id through again as attempt, as client.Redrive does (the
// redrive recorded on the header, a render request without cause), and records the
// judge's new answer; the aggregator's new decision replaces the blocked outcome.
func (f *fixture) redrive(id string, attempt int, raw string, confidence float64) {
	f.t.Helper()
	rec := f.agg.Job(f.tenant, f.batch, id)
	if rec == nil || !rulebook.Redrivable(rec) {
		f.t.Fatalf("job %s is not redrivable", id)
	}
	f.agg.StartRedrive(f.tenant, f.batch, attempt, []string{id})
	req := events.NewAttempt(&events.RenderRequested{Spec: rec.Spec}, f.tenant, f.batch, id, rec.Iteration, "", attempt, nil)
	f.publish(req)
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok", RawWinner: raw, Confidence: confidence, BiggestGap: "the headings"}}
	f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, rec.Iteration, "", &req.Envelope))
}

// redriven is the honest batch after `tribunal redrive`: its blocked AC-3 judged again as
// attempt 1 and the batch completed again.
func redriven(t *testing.T) *fixture {
	f := honest(t)
	f.redrive("AC-3", 1, ab.Assign("AC-3", 0).Label(ab.WinnerReference), 0.8)
	return f
}

// honest is a three-job batch: two compared (both routed to suggestions), one blocked.
func honest(t *testing.T) *fixture {
	f := newFixture(t)
	f.abJob("AC-1", 0, 3, ab.Assign("AC-1", 0).Label(ab.WinnerReference), 0.9)
	f.abJob("AC-2", 1, 3, "tie", 0.4)
	f.deadLettered("AC-3", 2, 3)
	return f
}

// audit audits the fixture's stream as `tribunal audit` would: in a process of its own,
// so over a blob store that has cached nothing.
func (f *fixture) audit() audit.Report {
	f.t.Helper()
	if f.dir == "" {
		return audit.Audit(f.recs, f.store)
	}
	st, err := fileblob.New(f.dir, fileblob.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	return audit.Audit(f.recs, st)
}

// find returns the index of the first recorded event of type t for job.
func (f *fixture) find(t events.Type, job string) int {
	for i, r := range f.recs {
		if r.OK() && r.Event.Type == t && r.Event.JobID == job && r.DeadLetter == "" {
			return i
		}
	}
	f.t.Fatalf("no %s for %q", t, job)
	return -1
}

// rewrite re-encodes recorded event i after change, keeping its id and position.
func (f *fixture) rewrite(i int, change func(*events.Event)) {
	f.t.Helper()
	ev := f.recs[i].Event
	change(&ev)
	data, err := events.Encode(ev)
	if err != nil {
		f.t.Fatal(err)
	}
	r := f.recs[i]
	f.recs[i] = audit.NewRecorded(r.Seq, r.Subject, r.Stored, data, r.MsgID, r.Reason)
}

// forgeWinner rewrites recorded iteration.decided i of an ab job to say ours won,
// leaving everything else as the aggregator wrote it.
func (f *fixture) forgeWinner(i int) {
	f.t.Helper()
	f.rewrite(i, func(ev *events.Event) {
		d := *ev.Payload.(*events.IterationDecided)
		r := *ab.DecidedOf(d.KindPart)
		r.Winner = "ours"
		d.KindPart = &r
		ev.Payload = &d
	})
}

func dump(rep audit.Report) string {
	var b strings.Builder
	for _, m := range rep.Mismatches {
		b.WriteString("\n  " + m.String())
	}
	for _, u := range rep.Unverified {
		b.WriteString("\n  unverified: " + u.String())
	}
	for _, r := range rep.Refused {
		b.WriteString("\n  " + r.String())
	}
	return b.String()
}

func has(rep audit.Report, pred func(audit.Mismatch) bool) bool {
	for _, m := range rep.Mismatches {
		if pred(m) {
			return true
		}
	}
	return false
}

func TestAuditHonestBatchIsClean(t *testing.T) {
	f := honest(t)
	rep := f.audit()
	if !rep.OK() {
		t.Fatalf("honest batch: %s", dump(rep))
	}
	if rep.Events != len(f.recs) || rep.Jobs != 3 || len(rep.Batches) != 1 || !rep.Batches[0].Complete {
		t.Fatalf("report %+v", rep)
	}
	// decisions: 3 outcomes, 1 manifest announcement and its contents, 1 completion
	if rep.Decisions < 6 {
		t.Fatalf("%d decisions re-derived, want at least 6", rep.Decisions)
	}
	if rep.Batches[0].Summary == nil || rep.Batches[0].Summary.Blocked != 1 || rep.Batches[0].Summary.Suggestions != 2 {
		t.Fatalf("summary %+v", rep.Batches[0].Summary)
	}
}

func TestAuditAlteredDecision(t *testing.T) {
	f := honest(t)
	i := f.find(events.TypeIterationDecided, "AC-1")
	f.rewrite(i, func(ev *events.Event) {
		d := *ev.Payload.(*events.IterationDecided)
		r := *ab.DecidedOf(d.KindPart)
		r.Winner, r.Suggest, r.Tag, r.Impact = "ours", false, "", ""
		d.KindPart = &r
		ev.Payload = &d
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMismatch && m.Job == "AC-1" && m.Field == "ab.winner" && m.EventType == events.TypeIterationDecided &&
			m.Recorded == `"ours"` && m.Derived == `"reference"` && m.FromType == events.TypeVerdictEmitted
	}) {
		t.Fatalf("no ab.winner mismatch for AC-1: %s", dump(rep))
	}
}

func TestAuditAlteredVerdictBreaksTheChain(t *testing.T) {
	f := honest(t)
	i := f.find(events.TypeVerdictEmitted, "AC-2")
	f.rewrite(i, func(ev *events.Event) {
		p := *ev.Payload.(*events.VerdictEmitted)
		p.Votes = append([]events.Vote(nil), p.Votes...)
		p.Votes[0].Confidence = 0.41
		ev.Payload = &p
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Job == "AC-2" && m.Field == "ab.confidence" && m.FromID == f.recs[i].Event.ID
	}) {
		t.Fatalf("no confidence mismatch from the altered verdict: %s", dump(rep))
	}
	if !has(rep, func(m audit.Mismatch) bool { return m.EventType == events.TypeManifestEmitted && m.Field == "digest" }) {
		t.Fatalf("the manifest's digest chain did not notice: %s", dump(rep))
	}
}

func TestAuditTamperedManifestIsUnreadable(t *testing.T) {
	f := honest(t)
	i := f.find(events.TypeManifestEmitted, "")
	sha := f.recs[i].Event.Payload.(*events.ManifestEmitted).Manifest.SHA256
	path := f.blobPath(sha)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "pending_review", "approved_ok_", 1)), 0o640); err != nil {
		t.Fatal(err)
	}
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindUnreadable && m.EventID == f.recs[i].Event.ID && strings.Contains(m.Detail, "digest mismatch")
	}) {
		t.Fatalf("tampered manifest not reported: %s", dump(rep))
	}
}

func TestAuditReannouncedManifestIsCompared(t *testing.T) {
	// A self-consistent but different manifest blob, announced in place of the real one.
	f := honest(t)
	i := f.find(events.TypeManifestEmitted, "")
	sha := f.recs[i].Event.Payload.(*events.ManifestEmitted).Manifest.SHA256
	data, _, err := blob.ReadAll(context.Background(), f.store, blob.Ref{Tenant: f.tenant, SHA256: sha})
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(data), `"winner": "reference"`, `"winner": "ours"`, 1)
	attrs, err := blob.PutBytes(context.Background(), f.store, f.tenant, []byte(forged), "application/json")
	if err != nil {
		t.Fatal(err)
	}
	f.rewrite(i, func(ev *events.Event) {
		p := *ev.Payload.(*events.ManifestEmitted)
		p.Manifest.SHA256, p.Manifest.Size = attrs.Ref.SHA256, attrs.Size
		ev.Payload = &p
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Field == "manifest(ab).comparisons[0].winner" && m.Recorded == `"ours"` && m.Derived == `"reference"`
	}) {
		t.Fatalf("forged manifest contents not named: %s", dump(rep))
	}
}

func TestAuditDuplicateVerdictAndForgedID(t *testing.T) {
	f := honest(t)
	i := f.find(events.TypeVerdictEmitted, "AC-2")
	dup := f.recs[i].Event
	dup.ID = "0123456789abcdef0123456789abcdef"
	f.publish(dup)
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindDuplicate && m.Job == "AC-2" && m.EventID == dup.ID
	}) {
		t.Fatalf("duplicate verdict not reported: %s", dump(rep))
	}
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindID && m.EventID == dup.ID && m.Field == "envelope.id"
	}) {
		t.Fatalf("non-deterministic id not reported: %s", dump(rep))
	}
}

func TestAuditUndecodableAndMisrouted(t *testing.T) {
	f := honest(t)
	f.raw("tribunal.team-a.verdict.emitted", []byte{0xc1, 'x'}, "garbage", "")
	i := f.find(events.TypeVerdictEmitted, "AC-1")
	f.raw("tribunal.team-b.verdict.emitted", f.recs[i].Raw, "elsewhere", "")
	rep := f.audit()
	if rep.Count(audit.KindUndecodable) != 1 || rep.Count(audit.KindSubject) != 1 {
		t.Fatalf("want one undecodable and one misrouted message: %s", dump(rep))
	}
}

func TestAuditMissingAndUnexplainedDecision(t *testing.T) {
	f := honest(t)
	i := f.find(events.TypeIterationDecided, "AC-2")
	forged := f.recs[i].Event
	f.recs = append(f.recs[:i], f.recs[i+1:]...)
	forged.Iteration = 4
	forged.ID = events.NewID(forged.Type, forged.Tenant, forged.BatchID, forged.JobID, 4, "")
	f.publish(forged)
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMissing && m.Job == "AC-2" && m.EventType == events.TypeIterationDecided
	}) {
		t.Fatalf("dropped decision not reported: %s", dump(rep))
	}
	if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindUnexplained && m.EventID == forged.ID }) {
		t.Fatalf("unexplained decision not reported: %s", dump(rep))
	}
}

func TestAuditJobWithoutOutcome(t *testing.T) {
	f := newFixture(t)
	f.abJob("AC-1", 0, 2, "A", 0.9)
	spec := abSpec("AC-2")
	f.publish(events.New(&events.JobSubmitted{Spec: spec, Index: 1, BatchSize: 2}, f.tenant, f.batch, "AC-2", 0, "", nil))
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMissing && m.Job == "AC-2" && m.Field == "outcome"
	}) {
		t.Fatalf("job without outcome not reported: %s", dump(rep))
	}
	if rep.Batches[0].Complete {
		t.Fatal("an unfinished batch reported complete")
	}
}

func TestAuditDecisionBeforeItsCause(t *testing.T) {
	f := honest(t)
	i := f.find(events.TypeVerdictEmitted, "AC-2")
	j := f.find(events.TypeIterationDecided, "AC-2")
	f.recs[i].Seq, f.recs[j].Seq = f.recs[j].Seq, f.recs[i].Seq
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindOrder && m.Job == "AC-2" }) {
		t.Fatalf("decision recorded before its verdict not reported: %s", dump(rep))
	}
}

func TestAuditDeadLetterReason(t *testing.T) {
	f := honest(t)
	for i, r := range f.recs {
		if r.DeadLetter != "" {
			f.recs[i] = audit.NewRecorded(r.Seq, r.Subject, r.Stored, r.Raw, r.MsgID, "another reason")
		}
	}
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Job == "AC-3" && m.EventType == events.TypeJobBlocked && m.Field == "reason"
	}) {
		t.Fatalf("blocked reason not re-derived from the dead letter: %s", dump(rep))
	}
}

func TestAuditRedrivenBatchIsClean(t *testing.T) {
	f := redriven(t)
	rep := f.audit()
	if !rep.OK() {
		t.Fatalf("redriven batch: %s", dump(rep))
	}
	if len(rep.Batches) != 1 || rep.Batches[0].Attempt != 1 || rep.Batches[0].Summary == nil ||
		rep.Batches[0].Summary.Blocked != 0 || rep.Batches[0].Summary.Compared != 3 {
		t.Fatalf("the latest completion is not the redrive's: %+v", rep.Batches)
	}
	// Both completions are re-derived: the first over the records as they were then.
	if clean := honest(t).audit(); rep.Decisions < clean.Decisions+4 {
		t.Fatalf("%d decisions re-derived, want at least %d", rep.Decisions, clean.Decisions+4)
	}
	// A redelivered dead letter of the first attempt is stale: it changes nothing.
	for _, r := range f.recs {
		if r.DeadLetter != "" {
			f.raw(r.Subject, r.Raw, r.MsgID, r.Reason)
			break
		}
	}
	if rep := f.audit(); !rep.OK() {
		t.Fatalf("a stale event of attempt 0 after the redrive: %s", dump(rep))
	}
}

func TestAuditRedriveAlterations(t *testing.T) {
	t.Run("first completion", func(t *testing.T) {
		// The first completion is still checked against the records before the redrive.
		f := redriven(t)
		i := f.find(events.TypeBatchCompleted, "")
		f.rewrite(i, func(ev *events.Event) {
			p := *ev.Payload.(*events.BatchCompleted)
			p.Blocked = 0
			ev.Payload = &p
		})
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.EventID == f.recs[i].Event.ID && m.Field == "blocked" && m.Recorded == "0" && m.Derived == "1"
		}) {
			t.Fatalf("altered first completion not reported: %s", dump(rep))
		}
	})
	t.Run("redriven decision", func(t *testing.T) {
		f := redriven(t)
		var i int
		for k, r := range f.recs {
			if r.OK() && r.Event.Type == events.TypeIterationDecided && r.Event.JobID == "AC-3" {
				i = k
			}
		}
		f.forgeWinner(i)
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Job == "AC-3" && m.Field == "ab.winner" && m.Derived == `"reference"` && m.FromType == events.TypeVerdictEmitted
		}) {
			t.Fatalf("altered redriven decision not reported: %s", dump(rep))
		}
	})
	t.Run("attempt of another step", func(t *testing.T) {
		// An event that claims another attempt than its id was derived for.
		f := redriven(t)
		i := f.find(events.TypeVerdictEmitted, "AC-1")
		f.rewrite(i, func(ev *events.Event) { ev.Attempt = 1 })
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindID && m.Job == "AC-1" && m.Field == "envelope.id"
		}) {
			t.Fatalf("id of the wrong attempt not reported: %s", dump(rep))
		}
	})
	t.Run("redrive of a compared job", func(t *testing.T) {
		f := redriven(t)
		spec := abSpec("AC-1")
		forged := f.publish(events.NewAttempt(&events.RenderRequested{Spec: spec}, f.tenant, f.batch, "AC-1", 0, "", 2, nil))
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindUnexplained && m.EventID == forged.Event.ID }) {
			t.Fatalf("redrive of a job that was not blocked not reported: %s", dump(rep))
		}
	})
	t.Run("redrive never completed", func(t *testing.T) {
		// The re-completion is announced although its job never got a new outcome.
		f := honest(t)
		rec := f.agg.Job(f.tenant, f.batch, "AC-3")
		f.publish(events.NewAttempt(&events.RenderRequested{Spec: rec.Spec}, f.tenant, f.batch, rec.ACID, 0, "", 1, nil))
		f.forgeCompletion(1)
		rep := f.audit()
		if rep.Count(audit.KindUnexplained) < 2 || rep.Batches[0].Attempt != 0 {
			t.Fatalf("a completion of an unfinished redrive not reported: %s", dump(rep))
		}
	})
}

// TestJobDecisions: the report lists every audited job's re-derived decision with the
// events it rests on, in order and named by type and sequence, and the findings about
// it; a decision with none was re-derived identically.
func TestJobDecisions(t *testing.T) {
	f := honest(t)
	rep := f.audit()
	ds := rep.JobDecisions()
	if len(ds) != 3 {
		t.Fatalf("%d decisions, want 3", len(ds))
	}
	for i, d := range ds {
		if d.Index != i || len(d.Mismatches) != 0 || len(d.Inputs) < 2 || d.Inputs[0].Type != events.TypeJobSubmitted || d.Inputs[0].Seq == 0 || d.Inputs[0].SHA256 == "" {
			t.Fatalf("decision %d: %+v", i, d)
		}
		found := false
		for _, in := range d.Inputs {
			found = found || in.ID == d.DecidedBy
		}
		if !found {
			t.Fatalf("%s: decided by %s, which is not among its inputs %+v", d.Job, d.DecidedBy, d.Inputs)
		}
	}
	i := f.find(events.TypeIterationDecided, "AC-1")
	f.forgeWinner(i)
	rep = f.audit()
	for _, d := range rep.JobDecisions() {
		if (len(d.Mismatches) > 0) != (d.Job == "AC-1") {
			t.Fatalf("%s: mismatches %+v", d.Job, d.Mismatches)
		}
	}
}
