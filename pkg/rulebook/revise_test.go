package rulebook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// reviewedSpec is an ab job of a two-job batch every AC of which goes to people.
func reviewedSpec(id string, decides bool) events.JobSpec {
	spec := abSpec(id)
	spec.Review = &events.ReviewSpec{Count: 2, Decides: decides}
	return spec
}

// completedBatch runs AC-1 and AC-2 through the runner over s, both judged "A" (ours
// wins), and completes the batch the way the aggregator does: the jobs folded, the
// manifests and index stored, the completion on the header.
func completedBatch(t *testing.T, s *casStore, r *rulebook.Runner, decides bool) records.Completion {
	t.Helper()
	ctx := context.Background()
	for i, id := range []string{"AC-1", "AC-2"} {
		if _, err := r.Apply(ctx, in(submit(reviewedSpec(id, decides), i, 2))); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Apply(ctx, in(abVerdict(id, "A", 0.9, 0))); err != nil {
			t.Fatal(err)
		}
	}
	f := rulebook.NewFold(tenant, batch)
	f.KeepIndex()
	if err := s.EachJob(ctx, tenant, batch, func(j *records.Job) error { f.Add(j); return nil }); err != nil {
		t.Fatal(err)
	}
	c, err := f.Complete("AC-2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutCompleted(ctx, tenant, batch, &c); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateHeader(ctx, tenant, batch, func(h *records.Batch) *records.Batch {
		n := *h
		n.Completion = &c.Completion
		return &n
	}); err != nil {
		t.Fatal(err)
	}
	return c.Completion
}

func lateReview(id, by, slot string, at time.Duration) events.Event {
	answer := `{"raw_winner":"` + slot + `","confidence":0.9,"biggest_gap":"slot ` + slot + ` covers more"}`
	e := events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: by, Via: "import"}, tenant, batch, id, 0, events.ReviewStep(by, answer), nil)
	e.Time = t0.Add(at)
	return e
}

// storedWinners reads the ab manifest the header's completion names from the store.
func storedWinners(t *testing.T, s *casStore) map[string]ab.Winner {
	t.Helper()
	h := s.headers[records.BatchKey(tenant, batch)]
	data, ok := s.blobs[h.Completion.Manifests[events.KindAB].SHA256]
	if !ok || h.Completion.ManifestRef == nil || *h.Completion.ManifestRef != h.Completion.Manifests[events.KindAB] {
		t.Fatalf("the header's ab manifest %+v is not stored", h.Completion.Manifests)
	}
	if h.Completion.Index == nil || s.blobs[h.Completion.Index.SHA256] == nil {
		t.Fatalf("the header's index %+v is not stored", h.Completion.Index)
	}
	var m ab.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]ab.Winner{}
	for _, c := range m.Comparisons {
		out[c.ACID] = c.Winner
	}
	return out
}

// TestLateDecidingReviewRevisesTheCompletion: a person's review that decides, applied to
// a batch that completed already, folds the batch again with the completion's fold: the
// stored completion and manifests say what the person decided, keep who completed the
// batch and the attempt, and say they were revised and by which review. The same review
// again revises nothing; a second reviewer's decision revises again, named as the cause.
func TestLateDecidingReviewRevisesTheCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r := &rulebook.Runner{Store: s}
	judged := completedBatch(t, s, r, true)
	ours := ab.Unshuffle("A", ab.Assign("AC-1", 0))
	if w := storedWinners(t, s); w["AC-1"] != ours || w["AC-2"] != ab.Unshuffle("A", ab.Assign("AC-2", 0)) {
		t.Fatalf("the judges' manifest: %v", w)
	}

	rv := lateReview("AC-1", "ann", "B", time.Hour)
	res, err := r.Apply(ctx, in(rv))
	if err != nil || res.Revised == nil {
		t.Fatalf("late review: %+v, %v", res, err)
	}
	h := s.headers[records.BatchKey(tenant, batch)]
	c := h.Completion
	if c.Revised == nil || c.Revised.Reviews != 1 || c.Revised.By != rv.ID || c.By != judged.By || c.Attempt != judged.Attempt {
		t.Fatalf("revised completion %+v (revised %+v)", c, c.Revised)
	}
	if c.Digest == judged.Digest || c.Manifests[events.KindAB] == judged.Manifests[events.KindAB] || !c.At.Equal(rv.Time) {
		t.Fatalf("the completion was not folded again: %+v", c)
	}
	person := ab.Unshuffle("B", ab.Assign("AC-1", 0))
	if w := storedWinners(t, s); w["AC-1"] != person || person == ours {
		t.Fatalf("the stored manifest says %s for AC-1; the person said %s", w["AC-1"], person)
	}
	// The fold over the records as they are is the stored completion, byte for byte.
	f := rulebook.NewFold(tenant, batch)
	f.KeepIndex()
	_ = s.EachJob(ctx, tenant, batch, func(j *records.Job) error { f.Add(j); return nil })
	again, err := f.Complete(c.By, c.Attempt)
	if err != nil || again.Completion.Digest != c.Digest || again.Completion.Manifests[events.KindAB] != c.Manifests[events.KindAB] {
		t.Fatalf("re-derived %+v, %v", again.Completion, err)
	}
	// The index holds the records in the order they were read; its entries are the same.
	stored, err1 := index.Decode(s.blobs[c.Index.SHA256])
	derived, err2 := index.Decode(again.Index)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(stored, derived) || stored[0].Row.Winner != string(ab.Unshuffle("B", ab.Assign("AC-1", 0))) {
		t.Fatalf("the stored index %+v, re-derived %+v (%v, %v)", stored, derived, err1, err2)
	}

	rev := s.headerRevs[records.BatchKey(tenant, batch)]
	dup, err := r.Apply(ctx, in(rv))
	if err != nil || dup.Revised != nil || dup.Job != nil || s.headerRevs[records.BatchKey(tenant, batch)] != rev {
		t.Fatalf("the same review again: %+v, %v; header revision %d, was %d", dup, err, s.headerRevs[records.BatchKey(tenant, batch)], rev)
	}

	rv2 := lateReview("AC-2", "bob", "B", 2*time.Hour)
	if res, err := r.Apply(ctx, in(rv2)); err != nil || res.Revised == nil {
		t.Fatalf("second review: %+v, %v", res, err)
	}
	c = s.headers[records.BatchKey(tenant, batch)].Completion
	if c.Revised.Reviews != 2 || c.Revised.By != rv2.ID {
		t.Fatalf("after the second review: %+v", c.Revised)
	}
}

// TestLateReviewLostCompletionIsMadeUp: a deciding review stored on its job whose
// revision was lost (a crash between the two writes) revises the completion when it is
// delivered again.
func TestLateReviewLostCompletionIsMadeUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r := &rulebook.Runner{Store: s}
	judged := completedBatch(t, s, r, true)
	rv := lateReview("AC-1", "ann", "B", time.Hour)
	j, rev, _ := s.Job(ctx, tenant, batch, "AC-1")
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(rv))
	if err != nil || !res.Revise {
		t.Fatalf("review: %+v, %v", res, err)
	}
	if ok, _ := s.PutJob(ctx, res.Job, rev); !ok {
		t.Fatal("store the reviewed job")
	}
	if c := s.headers[records.BatchKey(tenant, batch)].Completion; c.Digest != judged.Digest {
		t.Fatal("the completion changed without the runner")
	}
	again, err := r.Apply(ctx, in(rv))
	if err != nil || again.Revised == nil || again.Revised.Completion.Revised.By != rv.ID {
		t.Fatalf("redelivered: %+v, %v", again, err)
	}
}

// TestLateMeasuringReviewChangesNoCompletion: with decides false a review only measures
// the judge, so the stored completion and manifests stay as the batch finished them.
func TestLateMeasuringReviewChangesNoCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r := &rulebook.Runner{Store: s}
	judged := completedBatch(t, s, r, false)
	rev := s.headerRevs[records.BatchKey(tenant, batch)]
	res, err := r.Apply(ctx, in(lateReview("AC-1", "ann", "B", time.Hour)))
	if err != nil || res.Job == nil || res.Revised != nil || res.Revise {
		t.Fatalf("measuring review: %+v, %v", res, err)
	}
	c := s.headers[records.BatchKey(tenant, batch)].Completion
	if s.headerRevs[records.BatchKey(tenant, batch)] != rev || c.Revised != nil || c.Digest != judged.Digest {
		t.Fatalf("a measuring review changed the completion: %+v", c)
	}
}

// TestLateReviewsOfTwoJobsBothRevise: two late reviews of different ACs of one batch,
// the second stored by another aggregator between the first's fold and its write of the
// header. The first's write loses, it folds again, and the stored manifest holds both
// people's decisions.
func TestLateReviewsOfTwoJobsBothRevise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r := &rulebook.Runner{Store: s}
	completedBatch(t, s, r, true)
	other := &rulebook.Runner{Store: s}
	rv1, rv2 := lateReview("AC-1", "ann", "B", time.Hour), lateReview("AC-2", "bob", "B", time.Hour+time.Minute)
	var otherRes rulebook.Applied
	s.headerWriter = func(s *casStore) {
		var err error
		if otherRes, err = other.Apply(ctx, in(rv2)); err != nil {
			t.Errorf("the other aggregator: %v", err)
		}
	}
	res, err := r.Apply(ctx, in(rv1))
	if err != nil {
		t.Fatal(err)
	}
	if otherRes.Revised == nil {
		t.Fatalf("the other aggregator's review revised nothing: %+v", otherRes)
	}
	if res.Revised != nil {
		t.Errorf("the first review, folded again after losing its write, found the other's fold holding its decision and should write nothing; it wrote %+v", res.Revised)
	}
	w := storedWinners(t, s)
	if w["AC-1"] != ab.Unshuffle("B", ab.Assign("AC-1", 0)) || w["AC-2"] != ab.Unshuffle("B", ab.Assign("AC-2", 0)) {
		t.Fatalf("the stored manifest lost a review: %v", w)
	}
	if c := s.headers[records.BatchKey(tenant, batch)].Completion; c.Revised.Reviews != 2 || c.Revised.By != rv2.ID {
		t.Fatalf("revised %+v", c.Revised)
	}
}

// TestMemoryRevisesALateReview: the in-memory store (the audit's) revises a completed
// batch's completion through the same runner step.
func TestMemoryRevisesALateReview(t *testing.T) {
	t.Parallel()
	m := &rulebook.Memory{}
	for i, id := range []string{"AC-1", "AC-2"} {
		if _, err := m.Apply(in(submit(reviewedSpec(id, true), i, 2))); err != nil {
			t.Fatal(err)
		}
	}
	// A review before the batch completes is folded in by its completion.
	if _, err := m.Apply(in(abVerdict("AC-1", "A", 0.9, 0))); err != nil {
		t.Fatal(err)
	}
	early, err := m.Apply(in(lateReview("AC-1", "ann", "B", time.Minute)))
	if err != nil || early.Revised != nil {
		t.Fatalf("a review before completion: %+v, %v", early, err)
	}
	done, err := m.Apply(in(abVerdict("AC-2", "A", 0.9, 0)))
	if err != nil || done.Complete == nil {
		t.Fatalf("completion: %+v, %v", done, err)
	}
	rv := lateReview("AC-2", "bob", "B", time.Hour)
	res, err := m.Apply(in(rv))
	if err != nil || res.Revised == nil {
		t.Fatalf("late review: %+v, %v", res, err)
	}
	h := m.Header(tenant, batch)
	if h.Completion.Revised == nil || h.Completion.Revised.Reviews != 2 || h.Completion.Revised.By != rv.ID || h.Completion.By != "AC-2" || h.Completion.Summary.Total != 2 {
		t.Fatalf("memory's header: %+v", h.Completion)
	}
}

// TestReviewDuringTheCompletionIsFolded: a deciding review handled at the moment the
// batch's last verdict completes it, by another aggregator. The completion folded the
// records before the review stored its job, and the review read the header before the
// completion was stored, so neither saw the other: the stored completion kept the
// judge's outcome for an AC a person decided. The runner that completed the batch folds
// it again once the completion is stored, as a late review would, so the stored
// completion holds the person's decision and the revision is announced.
func TestReviewDuringTheCompletionIsFolded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r, other := &rulebook.Runner{Store: s}, &rulebook.Runner{Store: s}
	for _, e := range []events.Event{submit(reviewedSpec("AC-1", true), 0, 2), abVerdict("AC-1", "A", 0.9, 0), submit(reviewedSpec("AC-2", true), 1, 2)} {
		if _, err := r.Apply(ctx, in(e)); err != nil {
			t.Fatal(err)
		}
	}
	rv := lateReview("AC-1", "ann", "B", time.Hour)
	var raced rulebook.Applied
	s.completer = func(s *casStore, j *records.Job) ([]events.Event, error) {
		if j.ACID != "AC-2" {
			return nil, nil
		}
		s.completer = nil
		f := rulebook.NewFold(tenant, batch)
		f.KeepIndex()
		if err := s.EachJob(ctx, tenant, batch, func(j *records.Job) error { f.Add(j); return nil }); err != nil {
			return nil, err
		}
		c, err := f.Complete(j.ACID, 0)
		if err != nil {
			return nil, err
		}
		// Now the review, on another aggregator: stored on its job, it finds no
		// completion to revise.
		if raced, err = other.Apply(ctx, in(rv)); err != nil {
			return nil, err
		}
		if err := s.PutCompleted(ctx, tenant, batch, &c); err != nil {
			return nil, err
		}
		return rulebook.CompletionEvents(tenant, batch, &c.Completion), s.UpdateHeader(ctx, tenant, batch, func(h *records.Batch) *records.Batch {
			n := *h
			n.Completion = &c.Completion
			return &n
		})
	}
	res, err := r.Apply(ctx, in(abVerdict("AC-2", "A", 0.9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if raced.Revised != nil || raced.Job == nil {
		t.Fatalf("the review, handled during the completion: %+v", raced)
	}
	c := s.headers[records.BatchKey(tenant, batch)].Completion
	if c == nil || c.Revised == nil || c.Revised.By != rv.ID || c.Revised.Reviews != 1 || c.By != "AC-2" {
		t.Fatalf("the stored completion does not hold the review handled during it: %+v", c)
	}
	if w := storedWinners(t, s); w["AC-1"] != ab.Unshuffle("B", ab.Assign("AC-1", 0)) {
		t.Fatalf("the stored manifest says %s for AC-1, not the person's answer", w["AC-1"])
	}
	var revisions int
	for _, e := range res.Publish {
		if rulebook.IsRevision(e) {
			revisions++
		}
	}
	if res.Revised == nil || revisions != 1 {
		t.Fatalf("the completing verdict revised %v and announced %d revisions: %+v", res.Revised != nil, revisions, res.Publish)
	}
}

// TestCompletionWithReviewsIsNoRevision: reviews that decided before the batch completed
// are in its completion; folding it again once it is stored (which the runner does for a
// batch whose reviews decide) finds nothing new and stores no revision.
func TestCompletionWithReviewsIsNoRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r := &rulebook.Runner{Store: s}
	for _, e := range []events.Event{submit(reviewedSpec("AC-1", true), 0, 2), abVerdict("AC-1", "A", 0.9, 0), lateReview("AC-1", "ann", "B", time.Minute), submit(reviewedSpec("AC-2", true), 1, 2)} {
		if _, err := r.Apply(ctx, in(e)); err != nil {
			t.Fatal(err)
		}
	}
	s.completer = func(s *casStore, j *records.Job) ([]events.Event, error) {
		if j.ACID != "AC-2" {
			return nil, nil
		}
		f := rulebook.NewFold(tenant, batch)
		f.KeepIndex()
		_ = s.EachJob(ctx, tenant, batch, func(j *records.Job) error { f.Add(j); return nil })
		c, err := f.Complete(j.ACID, 0)
		if err != nil {
			return nil, err
		}
		_ = s.PutCompleted(ctx, tenant, batch, &c)
		return rulebook.CompletionEvents(tenant, batch, &c.Completion), s.UpdateHeader(ctx, tenant, batch, func(h *records.Batch) *records.Batch {
			n := *h
			n.Completion = &c.Completion
			return &n
		})
	}
	res, err := r.Apply(ctx, in(abVerdict("AC-2", "A", 0.9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.headers[records.BatchKey(tenant, batch)].Completion; c == nil || c.Revised != nil || res.Revised != nil {
		t.Fatalf("a completion that folded its reviews in was revised: %+v (%+v)", c, res.Revised)
	}
}

// TestCompletionNamesTheAnswersItFolded: a completion counts every answer of people its
// fold found applied (a replaced answer too) and names where the stream holds the latest
// events.MaxReviewSeqs of them, from the positions the rules kept on each review, so the
// audit folds the same answers whichever order the aggregator handled them in.
func TestCompletionNamesTheAnswersItFolded(t *testing.T) {
	t.Parallel()
	m := &rulebook.Memory{}
	seq := uint64(0)
	apply := func(e events.Event) rulebook.Applied {
		t.Helper()
		seq++
		i := in(e)
		i.Seq = seq
		res, err := m.Apply(i)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	apply(submit(reviewedSpec("AC-1", false), 0, 2))
	apply(abVerdict("AC-1", "A", 0.9, 0))
	const answers = events.MaxReviewSeqs + 6
	for i := range answers {
		answer := fmt.Sprintf(`{"raw_winner":"B","confidence":0.%02d,"biggest_gap":"slot B covers more"}`, 10+i)
		apply(events.New(&events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: "ann", Via: "import"}, tenant, batch, "AC-1", 0, events.ReviewStep("ann", answer), nil))
	}
	if r := m.Job(tenant, batch, "AC-1").Reviews; len(r) != 1 || r[0].Changes != answers-1 || len(r[0].Seqs) != answers || r[0].Seqs[answers-1] != seq {
		t.Fatalf("the review keeps where its answers are: %+v", r)
	}
	apply(submit(reviewedSpec("AC-2", false), 1, 2))
	res := apply(abVerdict("AC-2", "A", 0.9, 0))
	if res.Complete == nil {
		t.Fatal("the batch did not complete")
	}
	sum := res.Complete.Fold().Summary()
	if sum.ReviewsFolded != answers || len(sum.ReviewSeqs) != events.MaxReviewSeqs || sum.ReviewSeqs[0] != 3+answers-events.MaxReviewSeqs || sum.ReviewSeqs[events.MaxReviewSeqs-1] != 2+answers {
		t.Fatalf("the completion names %d answers at %v", sum.ReviewsFolded, sum.ReviewSeqs)
	}
	sum.Total = 2
	if err := sum.Validate(); err != nil {
		t.Fatal(err)
	}
	sum.ReviewSeqs = append(sum.ReviewSeqs, 1)
	if err := sum.Validate(); err == nil {
		t.Fatal("a completion naming more answers than it may is valid")
	}
}
