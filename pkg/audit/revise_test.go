package audit_test

import (
	"os"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// reviewedBatch is a completed two-job ab batch every AC of which goes to people,
// deciding or only measuring, and the completion as the judges left it.
func reviewedBatch(t *testing.T, decides bool) (*fixture, records.Completion) {
	t.Helper()
	f := newFixture(t)
	for i, id := range []string{"AC-1", "AC-2"} {
		spec := abSpec(id)
		spec.Review = &events.ReviewSpec{Count: 2, Decides: decides}
		sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: 2}, f.tenant, f.batch, id, 0, "", nil)
		f.in(sub)
		votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok", RawWinner: "A", Confidence: 0.9, BiggestGap: "the headings"}}
		f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", &sub.Envelope))
	}
	if f.completion == nil {
		t.Fatal("the batch did not complete")
	}
	return f, *f.completion
}

// review records a person's answer for id, slot B, after the batch began.
func (f *fixture) review(id, by string, after time.Duration) events.Event {
	answer := `{"raw_winner":"B","confidence":0.9,"biggest_gap":"slot B covers more"}`
	e := events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: by, Via: "import"}, f.tenant, f.batch, id, 0, events.ReviewStep(by, answer), nil)
	e.Time = f.at.Add(after)
	f.in(e)
	return e
}

// TestAuditLateDecidingReview: reviews that decide, recorded after the batch completed,
// revise its stored completion and manifests, and each announces its revision; the audit
// re-derives the revision (the people's outcomes, which review caused it), expects the
// latest revision's announcement and reads the revised manifests back. A header that
// kept the judges' completion, a revised manifest edited in the store, and a revision's
// announcement missing or altered, are findings.
func TestAuditLateDecidingReview(t *testing.T) {
	f, judged := reviewedBatch(t, true)
	f.review("AC-1", "ann", 41*time.Minute)
	last := f.review("AC-2", "bob", 42*time.Minute)
	c := f.completion
	if c.Revised == nil || c.Revised.Reviews != 2 || c.Revised.By != last.ID || c.Digest == judged.Digest {
		t.Fatalf("revised completion %+v", c)
	}
	rep := f.audit()
	audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
	if !rep.OK() {
		t.Fatalf("honest late reviews:%s", dump(rep))
	}

	// Each review announced the revision it made; the latest is re-derived, the earlier
	// one names a deciding review of the batch.
	var revisions []int
	for i, r := range f.recs {
		if m, ok := r.Event.Payload.(*events.ManifestEmitted); ok && m.RevisedBy != "" {
			revisions = append(revisions, i)
		}
	}
	if len(revisions) != 2 {
		t.Fatalf("%d revision announcements, want one per deciding review", len(revisions))
	}
	latest := revisions[len(revisions)-1]
	if m := f.recs[latest].Event.Payload.(*events.ManifestEmitted); m.RevisedBy != last.ID || m.Reviews != 2 ||
		m.Manifest != c.Manifests[events.KindAB] || m.ExitCode != c.Summary.ExitCode || m.Digest != c.Digest {
		t.Fatalf("the latest revision's announcement %+v, the revised completion %+v", m, c)
	}
	t.Run("revision's announcement missing", func(t *testing.T) {
		saved := append([]audit.Recorded(nil), f.recs...)
		t.Cleanup(func() { f.recs = saved })
		f.drop(latest)
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindMissing && m.EventType == events.TypeManifestEmitted && m.FromID == last.ID
		}) {
			t.Fatalf("a missing revision announcement not reported:%s", dump(rep))
		}
	})
	t.Run("revision's announcement tampered", func(t *testing.T) {
		saved := append([]audit.Recorded(nil), f.recs...)
		t.Cleanup(func() { f.recs = saved })
		f.rewrite(latest, func(ev *events.Event) {
			m := *ev.Payload.(*events.ManifestEmitted)
			m.Manifest = judged.Manifests[events.KindAB] // the judges' manifest, announced as the people's
			ev.Payload = &m
		})
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindID && m.EventType == events.TypeManifestEmitted
		}) ||
			!has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindMismatch && m.Field == "manifest.sha256" }) {
			t.Errorf("a tampered revision announcement not reported as such:%s", dump(rep))
		}
	})
	t.Run("an earlier revision's announcement forged", func(t *testing.T) {
		saved := append([]audit.Recorded(nil), f.recs...)
		t.Cleanup(func() { f.recs = saved })
		f.rewrite(revisions[0], func(ev *events.Event) {
			m := *ev.Payload.(*events.ManifestEmitted)
			m.ExitCode = 0
			ev.Payload = &m
		})
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindID && m.EventType == events.TypeManifestEmitted
		}) {
			t.Fatalf("a forged earlier revision announcement not reported:%s", dump(rep))
		}
	})

	t.Run("the judges' completion kept", func(t *testing.T) {
		rep := f.audit()
		h := f.header()
		h.Completion = &judged
		audit.CheckState(&rep, h, f.agg.Jobs(f.tenant, f.batch))
		for _, field := range []string{"completion.revised", "completion.manifests.ab.sha256", "completion.digest"} {
			if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindMismatch && m.Field == field }) {
				t.Errorf("no %s finding:%s", field, dump(rep))
			}
		}
	})
	t.Run("revised manifest edited", func(t *testing.T) {
		path := f.blobPath(c.Manifests[events.KindAB].SHA256)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.WriteFile(path, data, 0o640) })
		m := string(data)
		edited := []byte(m[:len(m)-2] + " \n")
		if err := os.WriteFile(path, edited, 0o640); err != nil {
			t.Fatal(err)
		}
		rep := f.audit()
		audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnreadable && m.Field == "completion.manifests.ab"
		}) {
			t.Fatalf("an edited revised manifest not reported:%s", dump(rep))
		}
	})
	t.Run("revision's cause rewritten", func(t *testing.T) {
		rep := f.audit()
		h := f.header()
		cc := *h.Completion
		cc.Revised = &records.Revision{Reviews: 2, By: "someone-else"}
		h.Completion = &cc
		audit.CheckState(&rep, h, f.agg.Jobs(f.tenant, f.batch))
		if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindMismatch && m.Field == "completion.revised.by" }) {
			t.Fatalf("a rewritten cause not reported:%s", dump(rep))
		}
	})
	// The people's answers are the revised manifest's winners.
	jobs := f.agg.Jobs(f.tenant, f.batch)
	for _, j := range jobs {
		if w := ab.DecidedOf(j.Decided.KindPart).Winner; w != string(ab.Unshuffle("B", ab.Assign(j.ACID, 0))) {
			t.Errorf("%s decided %s", j.ACID, w)
		}
	}
}

// TestAuditLateMeasuringReview: a review that only measures changes no completion, and
// the header keeping the judges' completion audits clean.
func TestAuditLateMeasuringReview(t *testing.T) {
	f, judged := reviewedBatch(t, false)
	f.review("AC-1", "ann", 41*time.Minute)
	if f.completion.Revised != nil || f.completion.Digest != judged.Digest {
		t.Fatalf("a measuring review revised %+v", f.completion)
	}
	rep := f.audit()
	audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
	if !rep.OK() {
		t.Fatalf("a measured batch:%s", dump(rep))
	}
}
