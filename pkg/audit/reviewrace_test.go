package audit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// handle applies a recorded input now, where the stream holds it (its position, as the
// aggregator's bus.Position gives it), and records what the rules publish: the
// aggregator handling it after inputs the stream holds after it.
func (f *fixture) handle(r audit.Recorded) {
	f.t.Helper()
	f.apply(r, rulebook.Input{Event: r.Event, Link: link(r), Subject: r.Subject, Seq: r.Seq})
}

// racedBatch is a two-job ab batch every AC of which goes to people (deciding or only
// measuring), whose review of AC-1 and AC-2's verdict, the batch's last, the aggregator
// handled in the other order than the stream holds them in: reviewFirst stores the
// review first and handles the verdict first (the completion's fold read AC-1 before
// the review was stored on it, so the completion has the judge's outcome and the review
// comes after it), otherwise the verdict is stored first and the review handled first
// (the completion folds the person's answer in).
func racedBatch(t *testing.T, decides, reviewFirst bool) *fixture {
	return racedBatchFrom(t, decides, reviewFirst, "")
}

// racedBatchFrom is racedBatch with the review published on subject ("": the team's
// own) and applied by an aggregator that takes it as the team's whatever its subject.
func racedBatchFrom(t *testing.T, decides, reviewFirst bool, subject string) *fixture {
	t.Helper()
	f := newFixture(t)
	spec := func(id string) events.JobSpec {
		s := abSpec(id)
		s.Review = &events.ReviewSpec{Count: 2, Decides: decides}
		return s
	}
	sub1 := events.New(&events.JobSubmitted{Spec: spec("AC-1"), Index: 0, BatchSize: 2}, f.tenant, f.batch, "AC-1", 0, "", nil)
	f.handle(f.publish(sub1))
	f.handle(f.publish(f.verdict(sub1)))
	sub2 := events.New(&events.JobSubmitted{Spec: spec("AC-2"), Index: 1, BatchSize: 2}, f.tenant, f.batch, "AC-2", 0, "", nil)
	f.handle(f.publish(sub2))
	answer := `{"raw_winner":"B","confidence":0.9,"biggest_gap":"slot B covers more"}`
	review := events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: "ann", Via: "import"}, f.tenant, f.batch, "AC-1", 0, events.ReviewStep("ann", answer), nil)
	review.Time = f.at.Add(41 * time.Minute)
	publishReview := func() audit.Recorded {
		if subject == "" {
			return f.publish(review)
		}
		r := f.publishOn(subject, review, review.ID, "")
		own, err := events.Subject(review.Tenant, review.Type)
		if err != nil {
			t.Fatal(err)
		}
		r.Subject = own // what the lying aggregator takes it for
		return r
	}
	if reviewFirst {
		rv := publishReview()
		v2 := f.publish(f.verdict(sub2))
		f.handle(v2)
		f.handle(rv)
	} else {
		v2 := f.publish(f.verdict(sub2))
		rv := publishReview()
		f.handle(rv)
		f.handle(v2)
	}
	if f.completion == nil {
		t.Fatal("the batch did not complete")
	}
	return f
}

// TestAuditReviewRacesTheLastVerdict: a person's review and the batch's last verdict,
// handled by the aggregator in another order than the stream holds them (two aggregator
// instances, or a redelivery), audit clean whichever way the race went, deciding or
// only measuring: the audit re-derives the completion with the reviews its fold really
// folded in, which the completion records.
func TestAuditReviewRacesTheLastVerdict(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		decides, reviewFirst bool
	}{
		{"deciding review stored first, handled after the completion", true, true},
		{"deciding review stored after the verdict, folded into the completion", true, false},
		{"measuring review stored first, handled after the completion", false, true},
		{"measuring review stored after the verdict, folded into the completion", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := racedBatch(t, tc.decides, tc.reviewFirst)
			rep := f.audit()
			audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
			if !rep.OK() {
				t.Fatalf("an honest race between a review and the last verdict:%s", dump(rep))
			}
		})
	}
}

// TestAuditReviewRaceAlterations: the completion's word on which answers it folded
// places them, and is checked like the rest of it: a list that leaves out an answer the
// completion folded, or names one it did not, is a finding (the completion the replay
// then derives is not the recorded one), and so is an answer altered after the fact, or
// one another team published for this team's AC, whatever the list says.
func TestAuditReviewRaceAlterations(t *testing.T) {
	completed := func(f *fixture) int {
		for i, r := range f.recs {
			if _, ok := r.Event.Payload.(*events.BatchCompleted); ok {
				return i
			}
		}
		t.Fatal("no batch.completed recorded")
		return -1
	}
	reviewAt := func(f *fixture) int { return f.find(events.TypeReviewRecorded, "AC-1") }
	t.Run("a folded answer left out of the list", func(t *testing.T) {
		f := racedBatch(t, true, false)
		f.rewrite(completed(f), func(ev *events.Event) {
			p := *ev.Payload.(*events.BatchCompleted)
			p.ReviewsFolded, p.ReviewSeqs = 0, nil
			ev.Payload = &p
		})
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.EventType == events.TypeManifestEmitted && m.Field == "manifest.sha256"
		}) {
			t.Fatalf("a completion hiding the answer it folded not reported:%s", dump(rep))
		}
	})
	t.Run("an answer the completion did not fold listed", func(t *testing.T) {
		f := racedBatch(t, true, true)
		seq := f.recs[reviewAt(f)].Seq
		f.rewrite(completed(f), func(ev *events.Event) {
			p := *ev.Payload.(*events.BatchCompleted)
			p.ReviewsFolded, p.ReviewSeqs = 1, []uint64{seq}
			ev.Payload = &p
		})
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool {
			return m.EventType == events.TypeManifestEmitted && m.Field == "manifest.sha256"
		}) {
			t.Fatalf("a completion claiming an answer it did not fold not reported:%s", dump(rep))
		}
	})
	for _, reviewFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("an answer altered, stored first %v", reviewFirst), func(t *testing.T) {
			f := racedBatch(t, true, reviewFirst)
			f.rewrite(reviewAt(f), func(ev *events.Event) {
				p := *ev.Payload.(*events.ReviewRecorded)
				p.Answer = `{"raw_winner":"A","confidence":0.9,"biggest_gap":"slot A covers more"}`
				ev.Payload = &p
			})
			rep := f.audit()
			if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindID && m.EventType == events.TypeReviewRecorded }) ||
				!has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindMismatch && m.Job == "AC-1" }) {
				t.Fatalf("an altered answer not reported:%s", dump(rep))
			}
		})
		t.Run(fmt.Sprintf("another team's answer folded, stored first %v", reviewFirst), func(t *testing.T) {
			f := racedBatchFrom(t, true, reviewFirst, "tribunal.team-b.review.recorded")
			// The aggregator's consumer takes no event whose subject contradicts its
			// envelope: the replay applies it nowhere, so what it decided is unexplained.
			rep := f.audit()
			if !has(rep, func(m audit.Mismatch) bool {
				return m.Kind == audit.KindSubject && m.EventType == events.TypeReviewRecorded
			}) ||
				!has(rep, func(m audit.Mismatch) bool {
					return m.Kind == audit.KindUnexplained && m.Job == "AC-1" && m.EventType == events.TypeIterationDecided
				}) {
				t.Fatalf("another team's answer decided this team's AC unreported:%s", dump(rep))
			}
		})
	}
}

// TestRunPlacesRacedReviews: on a real stream, Run's first read gathers which answers
// each completion folded (and keeps those the stream holds after the completing input),
// so the raced batches of TestAuditReviewRacesTheLastVerdict audit clean there too (read
// once, the audit places the answer where the stream holds it, which the whole read
// contradicts, so it reads again). The stream holds the fixture's messages at the
// positions the fixture gave them.
func TestRunPlacesRacedReviews(t *testing.T) {
	for _, reviewFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("stored first %v", reviewFirst), func(t *testing.T) {
			f := racedBatch(t, true, reviewFirst)
			_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			store(ctx, t, js, f.recs)
			rep, err := audit.Run(ctx, js, audit.Filter{Tenant: f.tenant, BatchID: f.batch}, f.store)
			if err != nil {
				t.Fatal(err)
			}
			audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
			if !rep.OK() || len(rep.Batches) != 1 || !rep.Batches[0].Complete {
				t.Fatalf("%+v%s", rep.Batches, dump(rep))
			}
			// Read once, the audit met the answer before the completion that says where
			// it was applied: the whole read contradicts where it went, so it read again.
			if rep.Reads != 2 || !strings.Contains(rep.ReadAgain, "completion") {
				t.Fatalf("%d reads, again because %q", rep.Reads, rep.ReadAgain)
			}
		})
	}
}
