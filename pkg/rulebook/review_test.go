package rulebook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

func reviewEvent(id, by, answer string, at time.Duration) events.Event {
	p := &events.ReviewRecorded{Kind: events.KindAB, Answer: answer, By: by, Via: "import"}
	e := events.New(p, tenant, batch, id, 0, events.ReviewStep(by, answer), nil)
	e.Time = t0.Add(at)
	return e
}

// judged is AC-7 (ours in slot A) judged "A" at 0.9: ours wins.
func judged(t *testing.T, decides bool) *records.Job {
	t.Helper()
	spec := abSpec("AC-7")
	spec.Review = &events.ReviewSpec{Share: 0.1, Seed: "s", Decides: decides}
	res, err := rulebook.Apply(rulebook.State{Job: pending(t, spec)}, in(abVerdict("AC-7", "A", 0.9, 0)))
	if err != nil || res.Job == nil || res.Job.Status != events.StatusCompared {
		t.Fatalf("verdict: %+v, %v", res, err)
	}
	return res.Job
}

// TestReviewMeasures: a review of a judged job keeps the judge's verdict and adds the
// person's, read by the kind (un-shuffled); the same person answering again is one
// review, the later, counted as a change; the same answer again changes nothing.
func TestReviewMeasures(t *testing.T) {
	j := judged(t, false)
	first := reviewEvent("AC-7", "ann", `{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B covers more"}`, time.Minute)
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(first))
	if err != nil || res.Job == nil || len(res.Publish) != 0 {
		t.Fatalf("review: %+v, %v", res, err)
	}
	r := res.Job.Reviews
	if len(r) != 1 || r[0].Person.Label != "reference" || r[0].Judge.Label != "ours" || r[0].Judge.Slot != "A" || r[0].Model != "scripted/m" || !r[0].At.Equal(first.Time) {
		t.Fatalf("reviews %+v", r)
	}
	if ab.DecidedOf(res.Job.Decided.KindPart).Winner != "ours" || res.Job.DecidedBy == first.ID {
		t.Fatal("a measuring review changed the outcome")
	}
	same, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(first))
	if err != nil || same.Job != nil {
		t.Fatalf("the same review again: %+v, %v", same, err)
	}
	later := reviewEvent("AC-7", "ann", `{"raw_winner":"A","confidence":0.8,"biggest_gap":"slot A is right"}`, 2*time.Minute)
	res2, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(later))
	if err != nil {
		t.Fatal(err)
	}
	r = res2.Job.Reviews
	if len(r) != 1 || r[0].Person.Label != "ours" || r[0].Changes != 1 || r[0].Replaced != first.ID || r[0].Event != later.ID {
		t.Fatalf("changed review %+v", r)
	}
	other := reviewEvent("AC-7", "bob", `{"raw_winner":"tie","confidence":0.5,"biggest_gap":"none"}`, 3*time.Minute)
	res3, err := rulebook.Apply(rulebook.State{Job: res2.Job}, in(other))
	if err != nil || len(res3.Job.Reviews) != 2 || res3.Job.Reviews[1].Person.Label != "tie" {
		t.Fatalf("second reviewer: %+v, %v", res3.Job, err)
	}
}

// TestReviewRefused: an answer outside the kind's contract, a job with no verdict yet,
// another iteration, or another kind's answer are refused, never recorded.
func TestReviewRefused(t *testing.T) {
	j := judged(t, false)
	for name, e := range map[string]events.Event{
		"bad raw_winner": reviewEvent("AC-7", "ann", `{"raw_winner":"a","confidence":0.7,"biggest_gap":"x"}`, time.Minute),
		"role word":      reviewEvent("AC-7", "ann", `{"raw_winner":"ours","confidence":0.7,"biggest_gap":"x"}`, time.Minute),
		"extra field":    reviewEvent("AC-7", "ann", `{"raw_winner":"A","confidence":0.7,"biggest_gap":"x","ac_id":"AC-7"}`, time.Minute),
	} {
		if _, err := rulebook.Apply(rulebook.State{Job: j}, in(e)); !errors.Is(err, rulebook.ErrRefused) || rulebook.RefusalReason(err) != rulebook.RefusedReview {
			t.Errorf("%s: %v, want a review refusal", name, err)
		}
	}
	ok := reviewEvent("AC-7", "ann", `{"raw_winner":"A","confidence":0.7,"biggest_gap":"x"}`, time.Minute)
	withCase := ok
	withCase.Payload = &events.ReviewRecorded{Kind: events.KindAB, Answer: `{"raw_winner":"A","confidence":0.7,"biggest_gap":"x"}`, By: "ann", Case: "c1"}
	if _, err := rulebook.Apply(rulebook.State{Job: j}, in(withCase)); !errors.Is(err, rulebook.ErrRefused) {
		t.Errorf("an ab review naming a case: %v", err)
	}
	if _, err := rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-7"))}, in(ok)); !errors.Is(err, rulebook.ErrRefused) {
		t.Errorf("a review of a pending job: %v", err)
	}
	wrongIter := ok
	wrongIter.Iteration = 1
	if _, err := rulebook.Apply(rulebook.State{Job: j}, in(wrongIter)); !errors.Is(err, rulebook.ErrRefused) {
		t.Errorf("a review of another iteration: %v", err)
	}
}

// TestReviewDecides: when the batch lets people decide, the reviewed job's outcome
// follows the review: the person's answer un-shuffled and routed like a vote, a new
// decision published caused by the review, the judge's verdict kept in the comparison.
func TestReviewDecides(t *testing.T) {
	j := judged(t, true)
	e := reviewEvent("AC-7", "ann", `{"raw_winner":"B","confidence":0.95,"biggest_gap":"slot B handles the error case"}`, time.Minute)
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(e))
	if err != nil {
		t.Fatal(err)
	}
	n := res.Job
	if ab.DecidedOf(n.Decided.KindPart).Winner != "reference" || n.DecidedBy != e.ID || !n.Reviews[0].Decides || n.Reviews[0].Judge.Label != "ours" {
		t.Fatalf("decided by review: %+v / %+v", ab.DecidedOf(n.Decided.KindPart), n.Reviews)
	}
	if len(res.Publish) != 1 || res.Publish[0].CausationID != e.ID || res.Publish[0].ID != events.NewID(events.TypeIterationDecided, tenant, batch, "AC-7", 0, events.ReviewedStep(e.ID)) {
		t.Fatalf("publish %+v", res.Publish)
	}
	r, err := ab.ResultOf(n)
	if err != nil || r.Comparison.Winner != ab.WinnerReference || r.Comparison.Tribunal.Review == nil || r.Comparison.Tribunal.Review.JudgeWinner != ab.WinnerOurs || len(r.Votes) != 1 {
		t.Fatalf("comparison %+v", r)
	}
	if got := rulebook.Outcome(n); got == "" {
		t.Fatal("no outcome")
	}
	// A second reviewer compares with the judge, not with the first person.
	e2 := reviewEvent("AC-7", "bob", `{"raw_winner":"A","confidence":0.9,"biggest_gap":"x"}`, 2*time.Minute)
	res2, err := rulebook.Apply(rulebook.State{Job: n}, in(e2))
	if err != nil || res2.Job.Reviews[1].Judge.Label != "ours" || ab.DecidedOf(res2.Job.Decided.KindPart).Winner != "ours" {
		t.Fatalf("second review: %+v, %v", res2.Job, err)
	}
	r2, _ := ab.ResultOf(res2.Job)
	if r2.Comparison.Tribunal.Review.JudgeWinner != ab.WinnerOurs {
		t.Fatalf("the judge's verdict was lost: %+v", r2.Comparison.Tribunal.Review)
	}
}

// TestReviewCritic: a critic review is checked by the critic's contract and read as the
// derived verdict with the three scores; deciding, the person's scores become the result
// with the judge's kept, and agreement compares the scores per dimension.
func TestReviewCritic(t *testing.T) {
	spec := events.JobSpec{Kind: events.KindCritic, ACID: "C-1", KindPart: &critic.Spec{Task: "t", Output: events.Source{Name: "o", URL: "https://x"}},
		Review: &events.ReviewSpec{Count: 1, Decides: true}}
	q := 8
	v := &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critic.Vote{Judge: events.JudgeInfo{Provider: "p", Model: "m"}, Status: events.VoteOK,
		Correctness: 8, Slop: 1, Scope: 9, Rationale: "r", ClaimedVerdict: "pass", ClaimedQuality: &q}}
	res, err := rulebook.Apply(rulebook.State{Job: pending(t, spec)}, in(events.New(v, tenant, batch, "C-1", 0, "", nil)))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(answer string) events.Event {
		e := events.New(&events.ReviewRecorded{Kind: events.KindCritic, Answer: answer, By: "ann"}, tenant, batch, "C-1", 0, events.ReviewStep("ann", answer), nil)
		e.Time = t0.Add(time.Minute)
		return e
	}
	if _, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(mk(`{"correctness":11,"slop":1,"scope":9,"verdict":"pass","quality":9,"rationale":"x"}`))); !errors.Is(err, rulebook.ErrRefused) {
		t.Fatalf("a score of 11: %v", err)
	}
	got, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(mk(`{"correctness":5,"slop":3,"scope":9,"verdict":"revise","quality":5,"rationale":"misses a fact"}`)))
	if err != nil {
		t.Fatal(err)
	}
	rv := got.Job.Reviews[0]
	if rv.Person.Label != "revise" || rv.Judge.Label != "pass" || rv.Person.Scores["correctness"] != 5 || rv.Judge.Scores["correctness"] != 8 {
		t.Fatalf("review %+v", rv)
	}
	r, _ := critic.ResultOf(got.Job)
	if r.Verdict != critic.VerdictRevise || r.ReviewedBy != "ann" || r.Judge == nil || r.Judge.Verdict != critic.VerdictPass || got.Job.Decided.KindPart.(*critic.Decided).Quality != 5 {
		t.Fatalf("decided by the review: %+v", r)
	}
	if rulebook.Outcome(got.Job) != kind.OutcomeFinding {
		t.Fatal("a revise is a finding")
	}
}
