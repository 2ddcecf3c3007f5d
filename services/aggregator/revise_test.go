package aggregator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// TestLateReviewsReviseTheStoredCompletion: a completed ab batch whose reviews decide,
// then a late review of every AC, each handled at once by two aggregator instances over
// one real NATS server's buckets. Their header writes collide; each loser folds again,
// so the stored completion and manifest end up holding every person's answer, the
// completion says how many and which review came last, the stored index rows say what
// people decided, and the stored completion is the fold of the records as they are. A
// measuring batch's late review changes no stored completion.
func TestLateReviewsReviseTheStoredCompletion(t *testing.T) {
	env := handlertest.New(t)
	ctx := context.Background()
	st := records.New(env.Buckets)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const n = 6
	batchOf := func(decides bool) string {
		if decides {
			return "deciding"
		}
		return "measuring"
	}
	complete := func(a *aggregator.Service, batch string, decides bool) {
		t.Helper()
		for i := range n {
			id := fmt.Sprintf("AC-%d", i+1)
			spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "c", Review: &events.ReviewSpec{Count: n, Decides: decides},
				KindPart: &ab.Spec{Ours: events.Source{Name: "o.md", URL: "https://x/o"}, Reference: events.Source{Name: "r.md", URL: "https://x/r"}, Threshold: 0.75}}
			sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: n}, "team-a", batch, id, 0, "", nil)
			sub.Time = t0
			v := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"},
				Order: "AB", Status: events.VoteOK, RawWinner: "A", Confidence: 0.9, BiggestGap: "gap"}}}, "team-a", batch, id, 0, "", &sub.Envelope)
			v.Time = t0.Add(time.Second)
			for _, e := range []events.Event{sub, v} {
				if _, err := handlertest.Deliver(ctx, a.Handle, e); err != nil {
					t.Fatalf("%s %s: %v", e.Type, id, err)
				}
			}
		}
		if h, _, err := st.Header(ctx, "team-a", batch); err != nil || h == nil || h.Completion == nil {
			t.Fatalf("batch %s did not complete: %+v %v", batch, h, err)
		}
	}
	review := func(batch, id string, i int) events.Event {
		answer := `{"raw_winner":"B","confidence":0.9,"biggest_gap":"slot B covers more"}`
		e := events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: "ann", Via: "import"}, "team-a", batch, id, 0, events.ReviewStep("ann", answer), nil)
		e.Time = t0.Add(time.Hour + time.Duration(i)*time.Minute)
		return e
	}
	a1, a2 := aggregator.New(env.Buckets, env.Store, quiet), aggregator.New(env.Buckets, env.Store, quiet)

	complete(a1, batchOf(true), true)
	judged, _, _ := st.Header(ctx, "team-a", batchOf(true))
	var last events.Event
	var wg sync.WaitGroup
	for i := range n {
		e := review(batchOf(true), fmt.Sprintf("AC-%d", i+1), i)
		last = e
		for _, a := range []*aggregator.Service{a1, a2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := handlertest.Deliver(ctx, a.Handle, e); err != nil {
					t.Errorf("review of %s: %v", e.JobID, err)
				}
			}()
		}
	}
	wg.Wait()
	h, _, err := st.Header(ctx, "team-a", batchOf(true))
	if err != nil {
		t.Fatal(err)
	}
	c := h.Completion
	if c.Revised == nil || c.Revised.Reviews != n || c.Revised.By != last.ID || c.By != judged.Completion.By || c.Digest == judged.Completion.Digest {
		t.Fatalf("stored completion %+v, revised %+v", c, c.Revised)
	}
	data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: "team-a", SHA256: c.ManifestRef.SHA256})
	if err != nil {
		t.Fatal(err)
	}
	var m ab.Manifest
	if err := json.Unmarshal(data, &m); err != nil || len(m.Comparisons) != n {
		t.Fatalf("stored manifest: %v\n%s", err, data)
	}
	for _, cmp := range m.Comparisons {
		if want := ab.Unshuffle("B", ab.Assign(cmp.ACID, 0)); cmp.Winner != want || cmp.Tribunal == nil || cmp.Tribunal.Review == nil {
			t.Errorf("%s in the stored manifest: %s, the person said %s (%+v)", cmp.ACID, cmp.Winner, want, cmp.Tribunal)
		}
	}
	idx, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: "team-a", SHA256: c.Index.SHA256})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := index.Decode(idx)
	if err != nil || len(entries) != n {
		t.Fatalf("stored index: %d entries, %v", len(entries), err)
	}
	for _, e := range entries {
		if want := string(ab.Unshuffle("B", ab.Assign(e.Row.ACID, 0))); e.Row.Winner != want {
			t.Errorf("%s in the stored index: %s, want %s", e.Row.ACID, e.Row.Winner, want)
		}
	}
	f := rulebook.NewFold("team-a", batchOf(true))
	if err := st.EachJob(ctx, "team-a", batchOf(true), func(j *records.Job) error { f.Add(j); return nil }); err != nil {
		t.Fatal(err)
	}
	again, err := f.Complete(c.By, c.Attempt)
	if err != nil || again.Completion.Digest != c.Digest || again.Completion.Manifests[events.KindAB] != c.Manifests[events.KindAB] {
		t.Fatalf("the stored completion is not the fold of the records: %+v, %v", again.Completion, err)
	}
	// The same review again revises nothing.
	_, rev, _ := st.Header(ctx, "team-a", batchOf(true))
	if _, err := handlertest.Deliver(ctx, a2.Handle, last); err != nil {
		t.Fatal(err)
	}
	if _, rev2, _ := st.Header(ctx, "team-a", batchOf(true)); rev2 != rev {
		t.Fatalf("a redelivered review wrote the header again (revision %d, was %d)", rev2, rev)
	}

	complete(a1, batchOf(false), false)
	before, rev, _ := st.Header(ctx, "team-a", batchOf(false))
	if _, err := handlertest.Deliver(ctx, a1.Handle, review(batchOf(false), "AC-1", 0)); err != nil {
		t.Fatal(err)
	}
	after, rev2, _ := st.Header(ctx, "team-a", batchOf(false))
	if rev2 != rev || after.Completion.Revised != nil || after.Completion.Digest != before.Completion.Digest {
		t.Fatalf("a measuring review changed the stored completion: %+v", after.Completion)
	}
}
