package aggregator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// raceStream is a stream as JetStream keeps it, written by aggregator instances that
// handle its inputs in an order of the test's choosing: each input is stored first (its
// position is where it stands), each output appended unless the stream holds its id.
type raceStream struct {
	t    *testing.T
	wire []handlertest.Wire
}

func (s *raceStream) store(ev events.Event) int {
	s.t.Helper()
	w, err := handlertest.Encode(ev)
	if err != nil {
		s.t.Fatal(err)
	}
	s.wire = append(s.wire, w)
	return len(s.wire) - 1
}

// handle has a handle the input stored at i, as the router does: with its payload digest
// and its position.
func (s *raceStream) handle(a *aggregator.Service, i int) {
	s.t.Helper()
	w := s.wire[i]
	ctx := bus.WithPosition(bus.WithPayloadDigest(context.Background(), w.Data), uint64(i+1), nil)
	out, err := a.Handle(ctx, w.Event)
	if err != nil {
		s.t.Fatalf("%s %s: %v", w.Event.Type, w.Event.JobID, err)
	}
	for _, o := range out {
		if !s.holds(o.ID) {
			s.store(o)
		}
	}
}

func (s *raceStream) holds(id string) bool {
	for _, w := range s.wire {
		if w.Event.ID == id {
			return true
		}
	}
	return false
}

// TestAuditOfTheAggregatorsReviewRace: two aggregator instances handle a person's review
// of AC-1 and AC-2's verdict, the batch's last, in the other order than the stream holds
// them; the completion the aggregator stored and announced has the review or not by that
// order, and the audit of the stream (and of the key-value state) is clean either way.
func TestAuditOfTheAggregatorsReviewRace(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                 string
		decides, reviewFirst bool
	}{
		{"deciding, the review stored first and handled after the completion", true, true},
		{"deciding, the verdict stored first and handled after the review", true, false},
		{"measuring, the review stored first and handled after the completion", false, true},
		{"measuring, the verdict stored first and handled after the review", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := handlertest.New(t)
			a1, a2 := aggregator.New(env.Buckets, env.Store, quiet), aggregator.New(env.Buckets, env.Store, quiet)
			s := &raceStream{t: t}
			var last events.Event
			for i, id := range []string{"AC-1", "AC-2"} {
				spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "c", Review: &events.ReviewSpec{Count: 2, Decides: tc.decides},
					KindPart: &ab.Spec{Ours: events.Source{Name: "o.md", URL: "https://x/o"}, Reference: events.Source{Name: "r.md", URL: "https://x/r"}, Threshold: 0.75}}
				sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: 2}, "team-a", "b1", id, 0, "", nil)
				sub.Time = t0
				s.handle(a1, s.store(sub))
				last = events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"},
					Order: "AB", Status: events.VoteOK, RawWinner: "A", Confidence: 0.9, BiggestGap: "gap"}}}, "team-a", "b1", id, 0, "", &sub.Envelope)
				last.Time = t0.Add(time.Second)
				if i == 0 {
					s.handle(a1, s.store(last))
				}
			}
			answer := `{"raw_winner":"B","confidence":0.9,"biggest_gap":"slot B covers more"}`
			rv := events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: "ann", Via: "import"}, "team-a", "b1", "AC-1", 0, events.ReviewStep("ann", answer), nil)
			rv.Time = t0.Add(time.Hour)
			if tc.reviewFirst {
				r, v := s.store(rv), s.store(last)
				s.handle(a1, v)
				s.handle(a2, r)
			} else {
				v, r := s.store(last), s.store(rv)
				s.handle(a2, r)
				s.handle(a1, v)
			}
			st := records.New(env.Buckets)
			h, _, err := st.Header(context.Background(), "team-a", "b1")
			if err != nil || h == nil || h.Completion == nil {
				t.Fatalf("the batch did not complete: %+v, %v", h, err)
			}
			// What the completion announced folded the review only when it was handled first.
			announced := h.Completion.Summary
			if h.Completion.Announced != nil {
				announced = h.Completion.Announced.Summary
			}
			if folded := announced.ReviewsFolded; (folded == 1) == tc.reviewFirst {
				t.Fatalf("the completion announced %d answers folded: %+v", folded, announced)
			}
			var jobs []*records.Job
			if err := st.EachJob(context.Background(), "team-a", "b1", func(j *records.Job) error { jobs = append(jobs, j); return nil }); err != nil {
				t.Fatal(err)
			}
			rep := audit.Audit(replayed(s.wire), env.Store)
			audit.CheckState(&rep, h, jobs)
			if !rep.OK() {
				t.Fatalf("%s", fmt.Sprint(rep.Mismatches))
			}
		})
	}
}
