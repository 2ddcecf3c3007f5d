package rulebook_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
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

// TestReviewOnePersonTwoDoors: a reviewer is their by, whatever the door (via): one token
// answering through the ingress and then through the console is one review, the later
// with its door, the change counted; the same answer through the other door is the same
// event, applied once.
func TestReviewOnePersonTwoDoors(t *testing.T) {
	by := tokens.Reviewer(tenant, "team-a-reviewer-token-0123456789")
	door := func(via, answer string, at time.Duration) events.Event {
		e := reviewEvent("AC-7", by, answer, at)
		e.Payload.(*events.ReviewRecorded).Via = via
		return e
	}
	first := door("ingress", `{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B covers more"}`, time.Minute)
	res, err := rulebook.Apply(rulebook.State{Job: judged(t, false)}, in(first))
	if err != nil || res.Job == nil {
		t.Fatalf("through the ingress: %+v, %v", res, err)
	}
	later := door("console", `{"raw_winner":"A","confidence":0.8,"biggest_gap":"slot A is right"}`, 2*time.Minute)
	res2, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(later))
	if err != nil || res2.Job == nil {
		t.Fatalf("through the console: %+v, %v", res2, err)
	}
	r := res2.Job.Reviews
	if len(r) != 1 || r[0].By != by || r[0].Via != "console" || r[0].Person.Label != "ours" || r[0].Changes != 1 || r[0].Replaced != first.ID {
		t.Fatalf("reviews %+v, want one by %q via the console replacing %s", r, by, first.ID)
	}
	again := door("ingress", `{"raw_winner":"A","confidence":0.8,"biggest_gap":"slot A is right"}`, 3*time.Minute)
	if again.ID != later.ID {
		t.Fatalf("the same answer through another door is event %s, not %s", again.ID, later.ID)
	}
	if same, err := rulebook.Apply(rulebook.State{Job: res2.Job}, in(again)); err != nil || same.Job != nil {
		t.Fatalf("the same answer through another door: %+v, %v", same, err)
	}
	if a, err := client.ReviewAgreement([]*records.Job{res2.Job}, 1); err != nil || a == nil || a.Reviews != 1 {
		t.Fatalf("agreement %+v, %v: want one review", a, err)
	}
	// A review recorded before the doors shared the name keeps its own: another reviewer.
	old := reviewEvent("AC-7", "console:"+by, `{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B covers more"}`, 4*time.Minute)
	res3, err := rulebook.Apply(rulebook.State{Job: res2.Job}, in(old))
	if err != nil || res3.Job == nil || len(res3.Job.Reviews) != 2 || res3.Job.Reviews[1].By != "console:"+by || res3.Job.Reviews[1].Changes != 0 {
		t.Fatalf("a review under the console's former name: %+v, %v", res3.Job, err)
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

const eqEquivalent = `{"verdict":"equivalent","behaviour_delta":"","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"both act at once"}}`
const eqRegressed = `{"verdict":"candidate-regressed","behaviour_delta":"the candidate skips the check","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"the check is gone"}}`

// judgedEquivalence is E-1 with cases c1 and c2 judged equivalent and c3 blocked (or
// equivalent too, allJudged), its review setting as given.
func judgedEquivalence(t *testing.T, rs *events.ReviewSpec, allJudged bool) *records.Job {
	t.Helper()
	src := events.Source{Name: "SKILL.md", URL: "https://x/s"}
	spec := events.JobSpec{Kind: events.KindEquivalence, ACID: "E-1", Review: rs, KindPart: &equivalence.Spec{Original: src, Candidate: src, Variant: events.VariantSkill, Round: 1,
		Cases: []events.Case{{ID: "c1", Input: "a", Tag: "happy"}, {ID: "c2", Input: "b", Tag: "edge"}, {ID: "c3", Input: "c", Tag: "edge"}}}}
	vote := func(id string) events.CaseVote {
		return events.CaseVote{CaseID: id, Judge: events.JudgeInfo{Provider: "scripted", Model: "e"}, Status: events.VoteOK, Verdict: equivalence.VerdictEquivalent,
			Efficiency: events.EfficiencySignal{OriginalDirectness: 3, CandidateDirectness: 3, InterpretationNotes: "x"}}
	}
	v := &events.VerdictEmitted{Kind: events.KindEquivalence, Cases: []events.CaseVote{vote("c1"), vote("c2"), {CaseID: "c3", Judge: events.JudgeInfo{Provider: "scripted", Model: "e"}, Status: events.VoteBlocked, Error: "runner down"}}}
	if allJudged {
		v.Cases[2] = vote("c3")
	}
	e := events.New(v, tenant, batch, "E-1", 0, "", nil)
	e.Time = t0.Add(time.Second)
	res, err := rulebook.Apply(rulebook.State{Job: pending(t, spec)}, in(e))
	if err != nil || res.Job == nil || !res.Job.Final() {
		t.Fatalf("verdict: %+v, %v", res, err)
	}
	return res.Job
}

func caseReview(by, caseID, answer string, at time.Duration) events.Event {
	p := &events.ReviewRecorded{Kind: events.KindEquivalence, Answer: answer, By: by, Via: "import", Case: caseID}
	e := events.New(p, tenant, batch, "E-1", 0, p.Step(), nil)
	e.Time = t0.Add(at)
	return e
}

// TestReviewEquivalencePerCase: an equivalence job is reviewed per case: a review names
// a case the judge gave a verdict, read by the judge's own answer contract against that
// case's verdict; one person has one review per case (answering a case again is one
// answer, the later, counted as a change) and reviews of two cases are two; a review
// naming no case, a case with no verdict (blocked) or outside the transfer set, and an
// answer outside the contract are refused. The job's outcome is the judge's.
func TestReviewEquivalencePerCase(t *testing.T) {
	j := judgedEquivalence(t, &events.ReviewSpec{Count: 1}, false)
	if got := (equivalence.Kind{}).ReviewCases(j); fmt.Sprint(got) != "[c1 c2]" {
		t.Fatalf("reviewable cases %v, want [c1 c2]", got)
	}
	for name, e := range map[string]events.Event{
		"no case":        caseReview("ann", "", eqEquivalent, time.Minute),
		"blocked case":   caseReview("ann", "c3", eqEquivalent, time.Minute),
		"unknown case":   caseReview("ann", "c9", eqEquivalent, time.Minute),
		"bad verdict":    caseReview("ann", "c1", `{"verdict":"same","behaviour_delta":"","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"x"}}`, time.Minute),
		"case_id inside": caseReview("ann", "c1", `{"case_id":"c1","verdict":"equivalent","behaviour_delta":"","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"x"}}`, time.Minute),
	} {
		_, err := rulebook.Apply(rulebook.State{Job: j}, in(e))
		if !errors.Is(err, rulebook.ErrRefused) || rulebook.RefusalReason(err) != rulebook.RefusedReview {
			t.Errorf("%s: %v, want a review refusal", name, err)
		}
		if name != "bad verdict" && name != "case_id inside" && (err == nil || !strings.Contains(err.Error(), "case")) {
			t.Errorf("%s: %v does not name the case", name, err)
		}
	}
	first := caseReview("ann", "c1", eqRegressed, time.Minute)
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(first))
	if err != nil || res.Job == nil || len(res.Publish) != 0 {
		t.Fatalf("review: %+v, %v", res, err)
	}
	r := res.Job.Reviews
	if len(r) != 1 || r[0].Case != "c1" || r[0].Person.Label != equivalence.VerdictRegressed || r[0].Judge.Label != equivalence.VerdictEquivalent ||
		r[0].Judge.Lenience <= r[0].Person.Lenience || r[0].Model != "scripted/e" {
		t.Fatalf("reviews %+v", r)
	}
	if rulebook.Outcome(res.Job) != rulebook.Outcome(j) || res.Job.DecidedBy == first.ID || res.Job.DecidedBy != j.DecidedBy {
		t.Fatal("a measuring review changed the outcome")
	}
	// The same answer to another case is another review; the same case again is one.
	c2 := caseReview("ann", "c2", eqRegressed, 2*time.Minute)
	res2, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(c2))
	if err != nil || len(res2.Job.Reviews) != 2 || res2.Job.Reviews[1].Case != "c2" || c2.ID == first.ID {
		t.Fatalf("a second case: %+v, %v", res2.Job, err)
	}
	again := caseReview("ann", "c1", eqEquivalent, 3*time.Minute)
	res3, err := rulebook.Apply(rulebook.State{Job: res2.Job}, in(again))
	if err != nil {
		t.Fatal(err)
	}
	r = res3.Job.Reviews
	if len(r) != 2 || r[0].Case != "c1" || r[0].Person.Label != equivalence.VerdictEquivalent || r[0].Changes != 1 || r[0].Replaced != first.ID {
		t.Fatalf("changed review %+v", r)
	}
	if same, err := rulebook.Apply(rulebook.State{Job: res3.Job}, in(again)); err != nil || same.Job != nil {
		t.Fatalf("the same review again: %+v, %v", same, err)
	}
	// Agreement: per model and kind, one pair per case reviewed.
	pairs := client.ReviewPairs([]*records.Job{res3.Job})
	ag, err := review.Agree(pairs, 1)
	if err != nil || len(ag) != 1 || ag[0].Kind != "equivalence" || ag[0].Model != "scripted/e" || ag[0].N != 2 || ag[0].Share.K != 1 || ag[0].Lenient != 1 ||
		len(ag[0].Disagreements) != 1 || ag[0].Disagreements[0].Case != "c2" {
		t.Fatalf("agreement %+v, %v", ag, err)
	}
}

// TestReviewEquivalenceDecides: when the batch lets people decide, a review decides its
// case: the AC's report and outcome are derived again from its cases with the person's
// answer in place of the judge's, a decision is published caused by the review, the
// judge's answers and each decided case's judge verdict are kept. A case decided before
// keeps its person's answer when another case is reviewed; a second person compares with
// the judge; the same person answering again decides anew.
func TestReviewEquivalenceDecides(t *testing.T) {
	j := judgedEquivalence(t, &events.ReviewSpec{Count: 1, Decides: true}, true)
	if rulebook.Outcome(j) != kind.OutcomeClean {
		t.Fatal("the judge's report does not pass")
	}
	e := caseReview("ann", "c2", eqRegressed, time.Minute)
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(e))
	if err != nil {
		t.Fatal(err)
	}
	n := res.Job
	if len(res.Publish) != 1 || res.Publish[0].CausationID != e.ID || res.Publish[0].ID != events.NewID(events.TypeIterationDecided, tenant, batch, "E-1", 0, events.ReviewedStep(e.ID)) {
		t.Fatalf("publish %+v", res.Publish)
	}
	r, err := equivalence.ResultOf(n)
	if err != nil || r.Report.Summary.Regressions != 1 || r.Report.Summary.Pass || rulebook.Outcome(n) != kind.OutcomeFinding || n.DecidedBy != e.ID || !n.Reviews[0].Decides {
		t.Fatalf("decided by the review: %+v, %v", r, err)
	}
	if len(r.Reviewed) != 1 || r.Reviewed[0] != (equivalence.CaseReview{Case: "c2", DecidedBy: "review", By: "ann", Verdict: equivalence.VerdictRegressed, JudgeVerdict: equivalence.VerdictEquivalent, Judge: "scripted/e"}) ||
		len(r.JudgeCases) != 3 || r.JudgeCases[1].Verdict != equivalence.VerdictEquivalent {
		t.Fatalf("the judge's verdicts were not kept: %+v", r)
	}
	if d := equivalence.DecidedOf(n.Decided.KindPart); d == nil || d.Regressions != 1 || d.Pass {
		t.Fatalf("decision %+v", d)
	}
	// Another case, by another person: the first decided case keeps ann's answer.
	e2 := caseReview("bob", "c1", `{"verdict":"candidate-diverged","behaviour_delta":"asks first","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"x"}}`, 2*time.Minute)
	res2, err := rulebook.Apply(rulebook.State{Job: n}, in(e2))
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := equivalence.ResultOf(res2.Job)
	if s := r2.Report.Summary; s.Regressions != 1 || s.Divergences != 1 || s.Equivalents != 1 || len(r2.Reviewed) != 2 || res2.Job.Reviews[1].Judge.Label != equivalence.VerdictEquivalent {
		t.Fatalf("second case: %+v / %+v", r2.Report.Summary, res2.Job.Reviews)
	}
	// ann again on c2: the later answer decides; the judge's verdict is still the judge's.
	e3 := caseReview("ann", "c2", eqEquivalent, 3*time.Minute)
	res3, err := rulebook.Apply(rulebook.State{Job: res2.Job}, in(e3))
	if err != nil {
		t.Fatal(err)
	}
	r3, _ := equivalence.ResultOf(res3.Job)
	if s := r3.Report.Summary; s.Regressions != 0 || !s.Pass || rulebook.Outcome(res3.Job) != kind.OutcomeClean || r3.Reviewed[0].JudgeVerdict != equivalence.VerdictEquivalent ||
		res3.Job.Reviews[0].Changes != 1 || res3.Job.Reviews[0].Judge.Label != equivalence.VerdictEquivalent {
		t.Fatalf("changed answer: %+v / %+v", r3, res3.Job.Reviews)
	}
}

// TestReviewEquivalenceTrials: a case whose three trials split is unsure, and a review
// deciding it replaces its answer in every trial, so the case's majority is the person's.
func TestReviewEquivalenceTrials(t *testing.T) {
	src := events.Source{Name: "SKILL.md", URL: "https://x/s"}
	spec := events.JobSpec{Kind: events.KindEquivalence, ACID: "E-1", Review: &events.ReviewSpec{Count: 1, Unsure: true, Decides: true}, Repeats: &events.Repeats{Trials: 3},
		KindPart: &equivalence.Spec{Original: src, Candidate: src, Variant: events.VariantSkill, Round: 1, Cases: []events.Case{{ID: "c1", Input: "a", Tag: "happy"}, {ID: "c2", Input: "b", Tag: "edge"}}}}
	var votes []events.CaseVote
	for trial := range 3 {
		for _, c := range []string{"c1", "c2"} {
			v := events.CaseVote{CaseID: c, Trial: trial, Judge: events.JudgeInfo{Provider: "scripted", Model: "e"}, Status: events.VoteOK, Verdict: equivalence.VerdictEquivalent,
				Efficiency: events.EfficiencySignal{OriginalDirectness: 3, CandidateDirectness: 3, InterpretationNotes: "x"}}
			if c == "c1" && trial == 2 {
				v.Verdict, v.BehaviourDelta = equivalence.VerdictRegressed, "drops the check"
			}
			votes = append(votes, v)
		}
	}
	e := events.New(&events.VerdictEmitted{Kind: events.KindEquivalence, Cases: votes}, tenant, batch, "E-1", 0, "", nil)
	res, err := rulebook.Apply(rulebook.State{Job: pending(t, spec)}, in(e))
	if err != nil || rulebook.Outcome(res.Job) != kind.OutcomeClean {
		t.Fatalf("verdict: %+v, %v", res.Job, err)
	}
	k := equivalence.Kind{}
	if u := k.CaseUnsure(res.Job, "c1"); len(u) != 1 || !strings.Contains(u[0], "2 of 3") {
		t.Fatalf("c1 unsure %v", u)
	}
	if u := k.CaseUnsure(res.Job, "c2"); len(u) != 0 {
		t.Fatalf("c2 unsure %v", u)
	}
	got, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(caseReview("ann", "c1", eqRegressed, time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := equivalence.ResultOf(got.Job)
	if r.Report.Summary.Regressions != 1 || rulebook.Outcome(got.Job) != kind.OutcomeFinding || len(r.JudgeCases) != 6 {
		t.Fatalf("decided: %+v", r.Report.Summary)
	}
	n := 0
	for _, v := range equivalence.DecidedOf(got.Job.Decided.KindPart).Cases {
		if v.CaseID == "c1" && v.Judge.Provider == equivalence.PersonProvider && v.Verdict == equivalence.VerdictRegressed {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("the person's answer is in %d of c1's 3 trials", n)
	}
	if u := k.CaseUnsure(got.Job, "c1"); len(u) != 1 {
		t.Fatalf("c1's doubt, the judge's, was lost: %v", u)
	}
}

// rubricAnswer is a rubric verdict over the default rubric scoring every dimension 1 but
// those in scores, in seed 004's verdict shape (no identity: it is filled in).
func rubricAnswer(t *testing.T, scores map[string]float64, allPass bool) string {
	t.Helper()
	r := argus.DefaultRubric()
	dims := map[string]argus.DimensionScore{}
	for _, d := range r.DimensionNames() {
		s, ok := scores[d]
		if !ok {
			s = 1
		}
		dims[d] = argus.DimensionScore{Score: s, Anchor: r.Dimensions[d].Anchor, Evidence: "seen on the render"}
	}
	data, err := json.Marshal(map[string]any{"dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": allPass, "failed_dimensions": []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func rubricReview(id, by, answer string, at time.Duration) events.Event {
	p := &events.ReviewRecorded{Kind: events.KindRubric, Answer: answer, By: by, Via: "import"}
	e := events.New(p, tenant, batch, id, 0, events.ReviewStep(by, answer), nil)
	e.Time = t0.Add(at)
	return e
}

// signedOffView is a headless view signed off by two passing verdicts, the second the
// one reviewed.
func signedOffView(t *testing.T) *records.Job {
	t.Helper()
	spec := viewSpec(events.ModeHeadless)
	j := pending(t, spec)
	st := rulebook.State{Job: j, KindState: viewState(&views.Record{}, argus.DefaultRubric())}
	res, err := rulebook.Apply(st, in(rubricVote(t, spec.ACID, 0, true)))
	if err != nil {
		t.Fatal(err)
	}
	res, err = rulebook.Apply(rulebook.State{Job: res.Job, KindState: viewState(recordOf(res.KindState), argus.DefaultRubric())}, in(rubricVote(t, spec.ACID, 1, true)))
	if err != nil || res.Job.Status != events.StatusSignedOff {
		t.Fatalf("signed off: %+v, %v", res.Job, err)
	}
	return res.Job
}

// TestReviewRubric: a rubric view's last verdict is reviewed in the verdict's own shape,
// checked by the judge's own parser against the view's rubric (kept on the record), read
// as pass or fail derived from the scores with every dimension's score in steps of 0.5;
// a measuring review changes no outcome, and the same person answering again is one
// review.
func TestReviewRubric(t *testing.T) {
	j := signedOffView(t)
	k, _ := kind.Lookup(events.KindRubric)
	jv, model, ok := k.(kind.Reviewing).JudgeVerdict(j)
	if !ok || jv.Label != "pass" || model != "p/m" || len(jv.Scores) != 7 || jv.Scores["visual_fidelity"] != 2 {
		t.Fatalf("judge verdict %+v %q %v", jv, model, ok)
	}
	// The person scores layout_spacing 0.5 and claims all_pass: the claim is re-derived.
	e := rubricReview(j.ACID, "ann", rubricAnswer(t, map[string]float64{"layout_spacing": 0.5}, true), time.Minute)
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(e))
	if err != nil || res.Job == nil || len(res.Publish) != 0 || res.Revise {
		t.Fatalf("review: %+v, %v", res, err)
	}
	r := res.Job.Reviews
	if len(r) != 1 || r[0].Person.Label != "fail" || r[0].Judge.Label != "pass" || r[0].Person.Scores["layout_spacing"] != 1 || r[0].Person.Scores["typography"] != 2 || r[0].Model != "p/m" || r[0].Decides {
		t.Fatalf("reviews %+v", r)
	}
	if res.Job.Status != events.StatusSignedOff || res.Job.DecidedBy == e.ID {
		t.Fatal("a rubric review changed the outcome")
	}
	again := rubricReview(j.ACID, "ann", rubricAnswer(t, nil, true), 2*time.Minute)
	res2, err := rulebook.Apply(rulebook.State{Job: res.Job}, in(again))
	if err != nil || len(res2.Job.Reviews) != 1 || res2.Job.Reviews[0].Person.Label != "pass" || res2.Job.Reviews[0].Changes != 1 {
		t.Fatalf("answered again: %+v, %v", res2.Job, err)
	}

	// The judge's contract, one place: each of these is refused, never recorded.
	full := rubricAnswer(t, nil, true)
	var noDim map[string]any
	_ = json.Unmarshal([]byte(full), &noDim)
	delete(noDim["dimensions"].(map[string]any), "hierarchy")
	missing, _ := json.Marshal(noDim)
	for name, answer := range map[string]string{
		"score 0.7":         rubricAnswer(t, map[string]float64{"typography": 0.7}, true),
		"missing dimension": string(missing),
		"wrong anchor":      strings.Replace(full, `"anchor":"reference"`, `"anchor":"spec-text"`, 1),
		"extra dimension":   strings.Replace(full, `"dimensions":{`, `"dimensions":{"mood":{"score":1,"anchor":"reference","evidence":"x"},`, 1),
		"blank evidence":    strings.Replace(full, `"seen on the render"`, `" "`, 1),
		"unknown field":     strings.Replace(full, `{"all_pass"`, `{"ac_id":"F--t--s--a","all_pass"`, 1),
		"an ab answer":      `{"raw_winner":"A","confidence":0.7,"biggest_gap":"x"}`,
	} {
		if answer == full {
			t.Fatalf("%s: the answer was not changed", name)
		}
		_, err := rulebook.Apply(rulebook.State{Job: j}, in(rubricReview(j.ACID, "ann", answer, time.Minute)))
		if !errors.Is(err, rulebook.ErrRefused) || rulebook.RefusalReason(err) != rulebook.RefusedReview {
			t.Errorf("%s: %v, want a review refusal", name, err)
		}
	}
	// A view still in its loop has no verdict to review.
	spec := viewSpec(events.ModeHeadless)
	first, err := rulebook.Apply(rulebook.State{Job: pending(t, spec), KindState: viewState(&views.Record{}, argus.DefaultRubric())}, in(rubricVote(t, spec.ACID, 0, true)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rulebook.Apply(rulebook.State{Job: first.Job}, in(rubricReview(spec.ACID, "ann", full, time.Minute))); !errors.Is(err, rulebook.ErrRefused) {
		t.Errorf("a review of a view in its loop: %v", err)
	}
}

// TestReviewRubricDecidesRefused: a rubric view's reviews never decide. A job spec that
// lets people decide is refused on the wire, naming review.decides; a record that says
// so anyway (written before) has every review of it refused, and the outcome stays the
// loop's.
func TestReviewRubricDecidesRefused(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	spec.Review = &events.ReviewSpec{Share: 1, Seed: "s", Decides: true}
	sub := submit(spec, 0, 1)
	if err := sub.Payload.(*events.JobSubmitted).Validate(); err == nil || !strings.Contains(err.Error(), "review.decides") {
		t.Fatalf("a deciding rubric spec: %v, want refused naming review.decides", err)
	}
	j := signedOffView(t)
	j.Spec.Review = &events.ReviewSpec{Share: 1, Seed: "s", Decides: true}
	_, err := rulebook.Apply(rulebook.State{Job: j}, in(rubricReview(j.ACID, "ann", rubricAnswer(t, map[string]float64{"typography": 0}, false), time.Minute)))
	if !errors.Is(err, rulebook.ErrRefused) || !strings.Contains(err.Error(), "HE-2") {
		t.Fatalf("a deciding review of a rubric view: %v, want refused", err)
	}
	if _, err := (rubric.Kind{}).DecideByReview(j, nil, "ann", events.Event{}); !errors.Is(err, kind.ErrRefused) {
		t.Fatalf("DecideByReview: %v", err)
	}
}
