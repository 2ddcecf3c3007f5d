package audit_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// The blobs the console and `tribunal results` show besides the artifacts (issue 23,
// item 7): each tamper below audited clean on de157a3 unless its comment says otherwise.

// answering is a provider whose every call answers one raw text.
type answering string

func (answering) Name() string         { return "scripted" }
func (answering) DefaultModel() string { return "m" }
func (a answering) Complete(context.Context, judge.Request) (judge.Response, error) {
	return judge.Response{Content: string(a)}, nil
}

// keepCall makes one judge call of job id through a recorder and keeps its record as
// the judge service does (stage.KeepCall), returning the reference its vote carries.
func (f *fixture) keepCall(id, raw string) *events.Blob {
	f.t.Helper()
	return f.keepCallOf(f.tenant, id, raw)
}

// keepCallOf is keepCall for a call of another tenant's.
func (f *fixture) keepCallOf(tenant, id, raw string) *events.Blob {
	f.t.Helper()
	ctx := context.Background()
	rec := judge.Record(answering(`{"raw_winner":"` + raw + `"}`))
	req := judge.Request{Kind: "ab", Key: id, Model: "m", Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: "Compare the slots of " + id + "."}}}}}
	if _, err := rec.Complete(ctx, req); err != nil {
		f.t.Fatal(err)
	}
	call := stage.KeepCall(ctx, f.store, nil, tenant, rec)
	if call == nil {
		f.t.Fatalf("the call record of %s was not kept", id)
	}
	return call
}

// editMeta rewrites the media type the file store keeps for an object.
func (f *fixture) editMeta(sha, from, to string) {
	f.t.Helper()
	path := f.blobPath(sha) + ".meta"
	data, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	if !strings.Contains(string(data), from) {
		f.t.Fatalf("%s does not keep %s: %s", path, from, data)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o640); err != nil {
		f.t.Fatal(err)
	}
}

// flipByte changes one byte of an object in the file store.
func (f *fixture) flipByte(sha string) {
	f.t.Helper()
	path := f.blobPath(sha)
	data, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(path, data, 0o640); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) verdictOf(job string) *events.VerdictEmitted {
	return f.recs[f.find(events.TypeVerdictEmitted, job)].Event.Payload.(*events.VerdictEmitted)
}

// TestAuditManifestMediaType: the store must keep a manifest under the media type the
// aggregator wrote it with, as it must an artifact under the one its event records.
// (Passed on de157a3: the manifest was only streamed through its digest check.)
func TestAuditManifestMediaType(t *testing.T) {
	f := staged(t)
	m := f.completion.Manifests[events.KindAB]
	f.editMeta(m.SHA256, "application/json", "text/html")
	rep := f.audit()
	if !has(rep, func(x audit.Mismatch) bool {
		return x.Kind == audit.KindMismatch && x.EventType == events.TypeManifestEmitted && x.Field == "manifest.media_type" &&
			x.Recorded == "text/html" && x.Derived == "application/json" && strings.Contains(x.Detail, "ab manifest")
	}) {
		t.Fatalf("edited manifest media type not reported:%s", dump(rep))
	}
}

// TestAuditCallRecords: every judge call's record (the prompt and raw answer reviewers
// are shown) is read back: one flipped byte no longer hashes to the address the vote
// records, a deleted one is gone, an edited media type differs; each finding names the
// record, the job and the call as the console numbers it. (Each passed on de157a3: the
// audit never read a call record.)
func TestAuditCallRecords(t *testing.T) {
	t.Run("flipped byte", func(t *testing.T) {
		f := staged(t)
		rec := f.verdictOf("AC-1").Votes[0].Judge.Call
		f.flipByte(rec.SHA256)
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnreadable && m.Job == "AC-1" && m.EventType == events.TypeVerdictEmitted && m.Field == "calls[0].record" &&
				m.Recorded == rec.SHA256 && strings.Contains(m.Detail, "the record of judge call 1 of 1 of job AC-1") && strings.Contains(m.Detail, "digest mismatch")
		}) || len(rep.Mismatches) != 1 {
			t.Fatalf("flipped byte in a call record not reported alone:%s", dump(rep))
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f := staged(t)
		rec := f.verdictOf("AC-2").Votes[0].Judge.Call
		if err := os.Remove(f.blobPath(rec.SHA256)); err != nil {
			t.Fatal(err)
		}
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnreadable && m.Job == "AC-2" && m.Field == "calls[0].record" && strings.Contains(m.Detail, "not found")
		}) {
			t.Fatalf("deleted call record not reported:%s", dump(rep))
		}
	})
	t.Run("media type", func(t *testing.T) {
		f := staged(t)
		rec := f.verdictOf("AC-1").Votes[0].Judge.Call
		f.editMeta(rec.SHA256, judge.CallRecordMediaType, "text/html")
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindMismatch && m.Job == "AC-1" && m.Field == "calls[0].record.media_type" && m.Recorded == "text/html" && m.Derived == judge.CallRecordMediaType
		}) {
			t.Fatalf("edited call record media type not reported:%s", dump(rep))
		}
	})
}

// TestAuditSwappedCallRecord: a call record replaced by another, intact one (stored
// honestly, the verdict rewritten to name it) reads back clean, but the record's address
// is part of the verdict's bytes: the digest chain over the events the batch's outcomes
// were derived from no longer matches the one the aggregator announced. (Caught on
// de157a3 already: it is why the record needs no digest field of its own.)
func TestAuditSwappedCallRecord(t *testing.T) {
	f := staged(t)
	i := f.find(events.TypeVerdictEmitted, "AC-1")
	swapped := f.keepCall("AC-1", "B")
	f.rewrite(i, func(ev *events.Event) {
		p := *ev.Payload.(*events.VerdictEmitted)
		p.Votes = append([]events.Vote(nil), p.Votes...)
		p.Votes[0].Judge.Call = swapped
		ev.Payload = &p
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool { return m.EventType == events.TypeManifestEmitted && m.Field == "digest" }) {
		t.Fatalf("the manifest's digest chain did not notice the swapped call record:%s", dump(rep))
	}
	if has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindUnreadable }) {
		t.Fatalf("the swapped record is intact, yet reported unreadable:%s", dump(rep))
	}
	audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
	if !has(rep, func(m audit.Mismatch) bool {
		return m.EventType == "job record" && m.Job == "AC-1" && strings.HasSuffix(m.Field, "sha256") && m.EventID == f.recs[i].Event.ID
	}) {
		t.Fatalf("the job record's chain did not name the rewritten verdict:%s", dump(rep))
	}
}

// TestAuditVerdictsWithoutCallRecords: verdicts recorded before call records were kept
// name none; the audit reads every event ever recorded, so they still audit clean, and
// the report says their calls are not covered.
func TestAuditVerdictsWithoutCallRecords(t *testing.T) {
	f := honest(t)
	rep := f.audit()
	if !rep.OK() {
		t.Fatalf("verdicts without call records:%s", dump(rep))
	}
	for _, u := range rep.Unverified {
		if u.What == "judge call records" && strings.HasPrefix(u.Why, "not covered") {
			return
		}
	}
	t.Fatalf("calls without records not listed as not covered:%s", dump(rep))
}

// TestAuditCachedCallRecords: a cached answer names the record of the call that paid for
// it. Held by this tenant it is checked like any other; held elsewhere (another tenant's,
// with a shared judge cache) it is noted as not covered, not reported.
func TestAuditCachedCallRecords(t *testing.T) {
	t.Run("held by the tenant", func(t *testing.T) {
		f := newFixture(t)
		call := f.keepCall("AC-0", "A") // an earlier batch's call of the same comparison
		f.cachedJob("AC-1", call)
		if rep := f.audit(); !rep.OK() {
			t.Fatalf("cached call:%s", dump(rep))
		}
		f.flipByte(call.SHA256)
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnreadable && m.Job == "AC-1" && m.Field == "calls[0].record" && strings.Contains(m.Detail, "digest mismatch")
		}) {
			t.Fatalf("flipped byte in a cached call's record not reported:%s", dump(rep))
		}
	})
	t.Run("held by another tenant", func(t *testing.T) {
		f := newFixture(t)
		call := f.keepCallOf("team-b", "AC-1", "A")
		f.cachedJob("AC-1", call)
		rep := f.audit()
		if !rep.OK() {
			t.Fatalf("cached call of another tenant:%s", dump(rep))
		}
		for _, u := range rep.Unverified {
			if u.What == "the records of cached judge calls" && strings.HasPrefix(u.Why, "not covered") {
				return
			}
		}
		t.Fatalf("the cached call's record kept elsewhere not listed as not covered:%s", dump(rep))
	})
}

// cachedJob submits an ab job whose one vote came from the judge-call cache, naming
// call, the record of the call that paid for it.
func (f *fixture) cachedJob(id string, call *events.Blob) {
	f.t.Helper()
	sub := events.New(&events.JobSubmitted{Spec: abSpec(id), Index: 0, BatchSize: 1}, f.tenant, f.batch, id, 0, "", nil)
	f.in(sub)
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m", Cached: true, Call: call}, Order: "AB", Status: "ok",
		RawWinner: "A", Confidence: 0.9, BiggestGap: "the headings"}}
	f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", &sub.Envelope))
}

// openedStaged is the staged batch opened with its plan (one page) first.
func openedStaged(t *testing.T) *fixture {
	f := newFixture(t)
	f.open("AC-1", "AC-2")
	f.stagedJob("AC-1", 0, 2, ab.Assign("AC-1", 0).Label(ab.WinnerReference), 0.9)
	f.stagedJob("AC-2", 1, 2, "tie", 0.4)
	return f
}

// TestAuditPlanPages: every page of the plan a batch.opened records is read back, not
// only when a cancel needs it: a flipped byte, a deleted page and an edited media type
// are each named by the page. (Passed on de157a3 unless the batch was cancelled.)
func TestAuditPlanPages(t *testing.T) {
	if rep := openedStaged(t).audit(); !rep.OK() || len(rep.Unverified) != 0 {
		t.Fatalf("honest opened batch:%s", dump(rep))
	}
	page := func(f *fixture) events.Blob {
		return f.recs[f.find(events.TypeBatchOpened, "")].Event.Payload.(*events.BatchOpened).Pages[0]
	}
	for _, c := range []struct {
		name, field, detail string
		tamper              func(f *fixture, sha string)
	}{
		{"flipped byte", "pages[0]", "digest mismatch", func(f *fixture, sha string) { f.flipByte(sha) }},
		{"deleted", "pages[0]", "not found", func(f *fixture, sha string) {
			if err := os.Remove(f.blobPath(sha)); err != nil {
				t.Fatal(err)
			}
		}},
		{"media type", "pages[0].media_type", "another media type", func(f *fixture, sha string) { f.editMeta(sha, "application/json", "text/html") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := openedStaged(t)
			p := page(f)
			c.tamper(f, p.SHA256)
			rep := f.audit()
			if !has(rep, func(m audit.Mismatch) bool {
				return m.EventType == events.TypeBatchOpened && m.Field == c.field && strings.Contains(m.Detail, "plan page 1 of 1 (jobs 0 to 1 of 2)") &&
					strings.Contains(m.Detail, c.detail)
			}) {
				t.Fatalf("%s plan page not reported:%s", c.name, dump(rep))
			}
		})
	}
}

// TestAuditHeaderWithoutEvents: a batch whose every event was deleted leaves nothing to
// replay, but its header still tells readers what was decided: CheckUnreplayed finds it
// in the state and reports it (its job records counted in the one finding), whichever
// tenant holds it; a batch the state does not know either is not reported. (On de157a3
// `tribunal audit` exited 2, "no events".)
func TestAuditHeaderWithoutEvents(t *testing.T) {
	f := staged(t)
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := bus.OpenBuckets(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	st := records.New(b)
	if err := st.EnsureHeader(ctx, *f.header()); err != nil {
		t.Fatal(err)
	}
	for _, j := range f.agg.Jobs(f.tenant, f.batch) {
		if _, err := st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	// Another batch's events stay on the stream.
	g := newFixture(t)
	g.batch = "b-2"
	g.stagedJob("AC-1", 0, 1, "tie", 0.4)
	store(ctx, t, js, g.recs)

	for _, tenant := range []string{f.tenant, ""} {
		filter := audit.Filter{Tenant: tenant, BatchID: f.batch}
		rep, err := audit.Run(ctx, js, filter, f.store)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Events != 0 {
			t.Fatalf("the stream holds %d events of %s", rep.Events, f.batch)
		}
		n, err := audit.CheckUnreplayed(ctx, &rep, js, filter, st)
		if err != nil {
			t.Fatal(err)
		}
		want := "batch b-1: the header says complete but the stream holds no event of it; the state holds 2 job records of it"
		if n != 1 || len(rep.Mismatches) != 1 || rep.Mismatches[0].Kind != audit.KindMissing || rep.Mismatches[0].Tenant != f.tenant ||
			!strings.Contains(rep.Mismatches[0].Detail, want) {
			t.Fatalf("tenant %q: %d headers without events:%s", tenant, n, dump(rep))
		}
	}
	rep, err := audit.Run(ctx, js, audit.Filter{BatchID: "b-3"}, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := audit.CheckUnreplayed(ctx, &rep, js, audit.Filter{BatchID: "b-3"}, st); err != nil || n != 0 || !rep.OK() {
		t.Fatalf("unknown batch: %d, %v:%s", n, err, dump(rep))
	}
	// An audited batch is CheckBatchState's, not reported again.
	rep, err = audit.Run(ctx, js, audit.Filter{BatchID: g.batch}, g.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureHeader(ctx, *g.header()); err != nil {
		t.Fatal(err)
	}
	if n, err := audit.CheckUnreplayed(ctx, &rep, js, audit.Filter{BatchID: g.batch}, st); err != nil || n != 0 || !rep.OK() {
		t.Fatalf("audited batch: %d, %v:%s", n, err, dump(rep))
	}
}
