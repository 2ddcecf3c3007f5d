package audit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// late applies a recorded input now, publishing only outputs whose ids the stream does
// not hold yet (it drops the copies, as JetStream does within its duplicate window): the
// aggregator handling an input after others stored later than it.
func (f *fixture) late(r audit.Recorded) {
	f.t.Helper()
	res, err := f.agg.Apply(rulebook.Input{Event: r.Event, Link: link(r), Subject: r.Subject, Seq: r.Seq})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range res.Publish {
		if f.holds(e.ID) {
			continue
		}
		f.publish(e)
	}
	if c := res.Complete; c != nil {
		f.announce(c.Fold(), c.By.ACID, c.Attempt)
	}
}

func (f *fixture) holds(id string) bool {
	for _, r := range f.recs {
		if r.OK() && r.Event.ID == id {
			return true
		}
	}
	return false
}

// open stores the batch's plan (one page) and publishes its batch.opened.
func (f *fixture) open(ids ...string) {
	f.t.Helper()
	page := records.PlanPage{}
	for _, id := range ids {
		page.Jobs = append(page.Jobs, records.PlannedJob{ID: id, Kind: events.KindAB})
	}
	data, err := records.EncodePlanPage(page)
	if err != nil {
		f.t.Fatal(err)
	}
	attrs, err := blob.PutBytes(context.Background(), f.store, f.tenant, data, "application/json")
	if err != nil {
		f.t.Fatal(err)
	}
	f.agg.LoadPlan = func(tenant string, ref events.Blob) (*records.PlanPage, error) {
		return records.LoadPlanPage(context.Background(), f.store, tenant, ref)
	}
	f.in(events.New(&events.BatchOpened{Size: len(ids), Source: "batch.yaml", Digest: strings.Repeat("d", 64),
		Pages: []events.Blob{{SHA256: attrs.Ref.SHA256, MediaType: "application/json", Size: attrs.Size}}}, f.tenant, f.batch, "", 0, "", nil))
}

func (f *fixture) submission(id string, index, size int) events.Event {
	return events.New(&events.JobSubmitted{Spec: abSpec(id), Index: index, BatchSize: size}, f.tenant, f.batch, id, 0, "", nil)
}

func (f *fixture) verdict(sub events.Event) events.Event {
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok", RawWinner: "A", Confidence: 0.9, BiggestGap: "the headings"}}
	return events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, sub.JobID, 0, "", &sub.Envelope)
}

// cancelled is a half-submitted batch of five whose cancel raced with its jobs: the
// aggregator applies its inputs concurrently, so it handled some of them in another
// order than the stream holds them.
//
//	AC-1 judged before the cancel: compared.
//	AC-2 its verdict stored before the cancel, handled after it: cancelled.
//	AC-3 its submission stored before the cancel, handled after it: cancelled, no render.
//	AC-4 never submitted: cancelled.
//	AC-5 its verdict stored after the cancel, handled before it: compared.
//	AC-6 its verdict handled before the cancel, but the cancel's announcement of the
//	     outcome reached the stream before the verdict's own: compared.
func cancelled(t *testing.T) *fixture {
	f := newFixture(t)
	const n = 6
	f.open("AC-1", "AC-2", "AC-3", "AC-4", "AC-5", "AC-6")
	s1 := f.submission("AC-1", 0, n)
	f.in(s1)
	f.in(f.verdict(s1))
	s2 := f.submission("AC-2", 1, n)
	f.in(s2)
	v2 := f.publish(f.verdict(s2))
	s3 := f.publish(f.submission("AC-3", 2, n))
	s5 := f.submission("AC-5", 4, n)
	f.in(s5)
	s6 := f.submission("AC-6", 5, n)
	f.in(s6)
	v6 := f.publish(f.verdict(s6))
	f.in(events.New(&events.BatchCancelRequested{By: "alice"}, f.tenant, f.batch, "", 0, "", nil))
	c := map[string]audit.Recorded{}
	for _, r := range f.recs {
		if _, ok := r.Event.Payload.(*events.JobCancelRequested); ok {
			c[r.Event.JobID] = r
		}
	}
	if len(c) != n {
		f.t.Fatalf("the cancel asked for %d jobs, want %d", len(c), n)
	}
	v5 := f.publish(f.verdict(s5))
	f.late(c["AC-1"])
	f.late(c["AC-2"])
	f.late(v2)
	f.late(c["AC-3"])
	f.late(s3)
	f.late(v5)
	f.late(c["AC-5"])
	decided, err := f.agg.Apply(rulebook.Input{Event: v6.Event, Link: link(v6), Subject: v6.Subject, Seq: v6.Seq})
	if err != nil || decided.Job == nil || !decided.Done {
		f.t.Fatalf("AC-6's verdict: %+v, %v", decided, err)
	}
	f.late(c["AC-6"])
	for _, e := range decided.Publish {
		if !f.holds(e.ID) {
			f.t.Fatalf("the cancel did not announce AC-6's outcome first")
		}
	}
	f.late(c["AC-4"])
	return f
}

// TestAuditCancelRacesAreClean: the audit replays each job's cancel where the aggregator
// applied it, so a cancelled batch whose cancel raced with its jobs audits clean.
func TestAuditCancelRacesAreClean(t *testing.T) {
	t.Run("the scan in memory", func(t *testing.T) { cancelRacesAreClean(t) })
	t.Run("the scan written out", func(t *testing.T) {
		defer audit.SpillCancelScan()()
		cancelRacesAreClean(t)
	})
}

func cancelRacesAreClean(t *testing.T) {
	f := cancelled(t)
	want := map[string]events.Status{"AC-1": events.StatusCompared, "AC-2": events.StatusBlocked, "AC-3": events.StatusBlocked,
		"AC-4": events.StatusBlocked, "AC-5": events.StatusCompared, "AC-6": events.StatusCompared}
	for id, s := range want {
		if j := f.agg.Job(f.tenant, f.batch, id); j == nil || j.Status != s {
			t.Fatalf("%s: %+v, want %s", id, j, s)
		}
	}
	if f.holds(events.NewID(events.TypeRenderRequested, f.tenant, f.batch, "AC-3", 0, "")) {
		t.Fatal("AC-3's submission came after its cancel: no render may be asked for")
	}
	rep := f.audit()
	if len(rep.Mismatches) != 0 {
		t.Fatalf("%d findings: %v", len(rep.Mismatches), rep.Mismatches)
	}
	if len(rep.Batches) != 1 || !rep.Batches[0].Complete || rep.Batches[0].Summary == nil || rep.Batches[0].Summary.Blocked != 3 {
		t.Fatalf("batches %+v", rep.Batches)
	}
}

// TestAuditCancelAlterations: what a cancel's events could be made to say is found: a
// job.blocked it never derived, a cancel fanned out to a job outside the plan.
func TestAuditCancelAlterations(t *testing.T) {
	t.Run("a cancelled job's reason", func(t *testing.T) {
		f := cancelled(t)
		i := -1
		for j, r := range f.recs {
			if p, ok := r.Event.Payload.(*events.JobBlocked); ok && r.Event.JobID == "AC-4" && p.Stage == rulebook.CancelStage {
				i = j
			}
		}
		f.rewrite(i, func(e *events.Event) { e.Payload.(*events.JobBlocked).Reason = "cancelled by mallory" })
		requireFinding(t, f.audit(), audit.KindMismatch, "AC-4", "reason")
	})
	t.Run("a cancel of a job outside the plan", func(t *testing.T) {
		f := cancelled(t)
		forged := events.New(&events.JobCancelRequested{Kind: events.KindAB, Index: 0, BatchSize: 5, By: "alice"}, f.tenant, f.batch, "AC-9", 0, "", nil)
		f.publish(forged)
		requireFinding(t, f.audit(), audit.KindUnexplained, "AC-9", "")
	})
}

func requireFinding(t *testing.T, rep audit.Report, kind audit.MismatchKind, job, field string) {
	t.Helper()
	for _, m := range rep.Mismatches {
		if m.Kind == kind && m.Job == job && (field == "" || m.Field == field) {
			return
		}
	}
	t.Fatalf("no %s finding for %s %s in %s", kind, job, field, fmt.Sprint(rep.Mismatches))
}
