package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestReviewDecidesThroughTheServices: on running services a batch whose review decides
// takes a person's review of AC-2 as its outcome (a new decision, caused by the review),
// the audit re-derives it clean, and a review.recorded edited on the stream (deleted and
// republished with another answer) is caught: its id is not its step's, and what was
// derived from it no longer matches.
func TestReviewDecidesThroughTheServices(t *testing.T) {
	env := NewEnv(t)
	env.Start(scriptedAll(t, nil), "all", bus.Services...)
	sub := env.Submit(WriteBatch(t, TextBatch(3, "review: {count: 3, decides: true}\n")), e2eTenant)
	env.WaitComplete(sub, 30*time.Second)
	WaitBatchCompleted(t, env.JS(), e2eTenant, sub.BatchID)
	r := env.clientRunning()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, _, err := client.ReviewQueue(ctx, r.Buckets, e2eTenant, sub.BatchID)
	if err != nil || len(q) != 3 {
		t.Fatalf("queue %d, %v", len(q), err)
	}
	e, _ := client.FindReviewEntry(q, "AC-2")
	judged := ab.DecidedOf(e.Job().Decided.KindPart)
	other := map[string]string{"A": "B", "B": "A"}[judged.RawWinner]
	answer := `{"raw_winner":"` + other + `","confidence":0.9,"biggest_gap":"the other slot is better"}`
	if err := client.RecordReview(r.Pub, e, []byte(answer), "ann@team-a", "console"); err != nil {
		t.Fatal(err)
	}
	var rec *records.Job
	poll.Until(t, 20*time.Second, "the review recorded on AC-2", func() (bool, string) {
		rec, _ = client.FindJob(ctx, r.Buckets, e2eTenant, sub.BatchID, "AC-2")
		return rec != nil && len(rec.Reviews) == 1, "not yet"
	})
	if ab.DecidedOf(rec.Decided.KindPart).Winner == judged.Winner || rec.DecidedBy != rec.Reviews[0].Event || rec.Reviews[0].Judge.Label != judged.Winner {
		t.Fatalf("the review did not decide: %+v, reviews %+v", ab.DecidedOf(rec.Decided.KindPart), rec.Reviews)
	}
	// The decision the review caused is published after its job record is stored, so an
	// audit read right after the record can find it not yet on the stream.
	var rep *audit.Report
	poll.Until(t, 20*time.Second, "the honest reviewed batch audited clean", func() (bool, string) {
		rep = auditBatch(t, env, sub.BatchID)
		return rep.OK(), "honest reviewed batch: " + auditDump(t, rep)
	})

	msg, ev := auditFind(t, env, events.TypeReviewRecorded, "AC-2")
	ev.Payload.(*events.ReviewRecorded).Answer = strings.Replace(answer, `"raw_winner":"`+other, `"raw_winner":"`+judged.RawWinner, 1)
	edited, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.stream().DeleteMsg(ctx, msg.Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS().PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: edited}, jetstream.WithMsgID("tampered-"+ev.ID)); err != nil {
		t.Fatal(err)
	}
	rep = auditBatch(t, env, sub.BatchID)
	idFound, derived := false, false
	for _, m := range rep.Mismatches {
		if m.Job == "AC-2" && m.Kind == audit.KindID && m.EventType == events.TypeReviewRecorded {
			idFound = true
		}
		if m.Job == "AC-2" && m.Kind != audit.KindID {
			derived = true
		}
	}
	if !idFound || !derived {
		t.Fatalf("edited review.recorded not caught (id %v, derived %v):%s", idFound, derived, auditDump(t, rep))
	}
}
