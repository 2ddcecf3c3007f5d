package aggregator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// TestRedeliveryAnnouncesWhatWasStored: the aggregator stores what it decided, then the
// router publishes it. When the store succeeds and the publish fails (a partition: the
// stream's leader cut off while the buckets' answer), the input is redelivered, and the
// aggregator finds its decision stored already. Whatever it stored it must announce again
// then, under the same ids (the stream drops what did reach it), or the stream never
// holds it. Every delivery here is one whose publish failed: its events are dropped and
// the input delivered again, over one real NATS server's buckets.
//
// The cases: the last verdict of a batch (its decision and the completion), a deciding
// review of the completed batch (the person's decision and the revision's announcement),
// and the last verdict again once that review revised the completion (the completion's
// first announcement is still the judges', and the revision is announced again).
func TestRedeliveryAnnouncesWhatWasStored(t *testing.T) {
	env := handlertest.New(t)
	ctx := context.Background()
	st := records.New(env.Buckets)
	a := aggregator.New(env.Buckets, env.Store, quiet)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const n, batch = 3, "redelivered"
	deliver := func(e events.Event) []events.Event {
		t.Helper()
		out, err := handlertest.Deliver(ctx, a.Handle, e)
		if err != nil {
			t.Fatalf("%s %s: %v", e.Type, e.JobID, err)
		}
		return out
	}
	var last events.Event
	for i := range n {
		id := fmt.Sprintf("AC-%d", i+1)
		spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "c", Review: &events.ReviewSpec{Count: n, Decides: true},
			KindPart: &ab.Spec{Ours: events.Source{Name: "o.md", URL: "https://x/o"}, Reference: events.Source{Name: "r.md", URL: "https://x/r"}, Threshold: 0.75}}
		sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: n}, "team-a", batch, id, 0, "", nil)
		sub.Time = t0
		v := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"},
			Order: "AB", Status: events.VoteOK, RawWinner: "A", Confidence: 0.9, BiggestGap: "gap"}}}, "team-a", batch, id, 0, "", &sub.Envelope)
		v.Time = t0.Add(time.Second)
		deliver(sub)
		last = v
		if i < n-1 {
			deliver(v)
		}
	}
	first := deliver(last) // stored, then the publish failed
	if len(handlertest.Of(first, events.TypeBatchCompleted)) != 1 {
		t.Fatalf("the last verdict announced %s, want its decision and the completion", types(first))
	}
	sameEvents(t, "the last verdict redelivered", deliver(last), first)

	answer := `{"raw_winner":"B","confidence":0.9,"biggest_gap":"slot B covers more"}`
	review := events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: "ann", Via: "import"}, "team-a", batch, "AC-1", 0, events.ReviewStep("ann", answer), nil)
	review.Time = t0.Add(time.Hour)
	reviewed := deliver(review) // stored and revised, then the publish failed
	if len(handlertest.Of(reviewed, events.TypeIterationDecided)) != 1 || len(handlertest.Of(reviewed, events.TypeManifestEmitted)) != 1 {
		t.Fatalf("the deciding review announced %s, want the person's decision and the revised manifest", types(reviewed))
	}
	if h, _, err := st.Header(ctx, "team-a", batch); err != nil || h.Completion.Revised == nil {
		t.Fatalf("the review did not revise the completion: %+v %v", h, err)
	}
	sameEvents(t, "the deciding review redelivered", deliver(review), reviewed)
	// The completing verdict also folds the batch again (a deciding review may have been
	// handled during its completion) and finds the revision stored: it announces that too.
	sameEvents(t, "the last verdict redelivered after the revision", deliver(last), append(first, handlertest.Of(reviewed, events.TypeManifestEmitted)...))
}

func types(evs []events.Event) []events.Type {
	var out []events.Type
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// sameEvents checks that a redelivery announced the same events as the first delivery:
// the same ids (the stream drops the copies of those it holds) and the same payloads
// (the copy that reaches it is the one it keeps).
func sameEvents(t *testing.T, what string, got, want []events.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s announced %s, want %s", what, types(got), types(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Type != w.Type || g.CausationID != w.CausationID {
			t.Errorf("%s: event %d is %s %s (cause %s), want %s %s (cause %s)", what, i, g.Type, g.ID, g.CausationID, w.Type, w.ID, w.CausationID)
			continue
		}
		ge, _ := events.Encode(events.Event{Envelope: events.Envelope{ID: "x", Type: g.Type, SchemaVersion: events.SchemaVersion, Tenant: "t"}, Payload: g.Payload})
		we, _ := events.Encode(events.Event{Envelope: events.Envelope{ID: "x", Type: w.Type, SchemaVersion: events.SchemaVersion, Tenant: "t"}, Payload: w.Payload})
		if string(ge) != string(we) {
			t.Errorf("%s: %s %s carries another payload than the first delivery's: %+v, want %+v", what, g.Type, g.ID, g.Payload, w.Payload)
		}
	}
}
