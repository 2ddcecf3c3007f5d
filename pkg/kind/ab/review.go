package ab

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// ReviewedBy is the value of ReviewNote.DecidedBy: a person's review decided.
const ReviewedBy = "review"

// PersonProvider is the provider a person's vote names when their review decides.
const PersonProvider = "person"

// lenience orders the winners by how favourable they are to ours.
var lenience = map[Winner]int{WinnerOurs: 2, WinnerTie: 1, WinnerReference: 0}

func verdictOf(w Winner, slot string) review.Verdict {
	if slot == RawTie {
		slot = ""
	}
	return review.Verdict{Label: string(w), Lenience: lenience[w], Slot: slot}
}

// JudgeVerdict implements kind.Reviewing: the un-shuffled winner and the slot it is in
// under the first order's assignment, the one a reviewer is shown.
func (Kind) JudgeVerdict(j *records.Job) (review.Verdict, string, bool) {
	if j.Status != events.StatusCompared || j.Decided == nil || DecidedOf(j.Decided.KindPart) == nil {
		return review.Verdict{}, "", false
	}
	d := DecidedOf(j.Decided.KindPart)
	return verdictOf(Winner(d.Winner), d.RawWinner), strings.Join(j.Judges, ","), true
}

// ReviewAnswer implements kind.Reviewing: the answer is an ab verdict over the blind
// slots, checked by the judge's own answer contract (raw_winner exactly A, B or tie,
// confidence in [0, 1], a biggest_gap), and un-shuffled by the job's assignment.
func (Kind) ReviewAnswer(j *records.Job, answer []byte) (review.Verdict, error) {
	v, err := ParseRawVerdict(answer)
	if err != nil {
		return review.Verdict{}, err
	}
	return verdictOf(Unshuffle(v.RawWinner, Assign(j.Spec.ACID, j.Iteration)), v.RawWinner), nil
}

// Unsure implements kind.Reviewing: a confidence below the routing threshold, a swap
// whose two orders disagreed, a panel that was not unanimous.
func (Kind) Unsure(j *records.Job) []string {
	if j.Status != events.StatusCompared || j.Decided == nil || DecidedOf(j.Decided.KindPart) == nil {
		return nil
	}
	d := DecidedOf(j.Decided.KindPart)
	var out []string
	if t := threshold(j); d.Confidence < t {
		out = append(out, fmt.Sprintf("confidence %.2f below %.2f", d.Confidence, t))
	}
	if d.Consistent != nil && !*d.Consistent {
		out = append(out, "swap flip")
	}
	if a, b, ok := strings.Cut(d.Agreement, "/"); ok && a != b {
		if _, err := strconv.Atoi(a); err == nil {
			out = append(out, "panel "+d.Agreement)
		}
	}
	// Repeated trials that did not all agree, and a ladder that had to climb.
	return append(out, trials.Unsure(j.Decided)...)
}

// DecideByReview implements kind.Reviewing: the person's answer is derived as the one
// vote of the comparison (un-shuffled and routed as a judge's would be); the judge's
// votes stay in the result and its verdict in the comparison's review note.
func (Kind) DecideByReview(j *records.Job, answer []byte, by string, ev events.Event) (*events.IterationDecided, error) {
	v, err := ParseRawVerdict(answer)
	if err != nil {
		return nil, err
	}
	old, err := ResultOf(j)
	if err != nil || old == nil {
		return nil, fmt.Errorf("job %s has no ab result to review: %v", j.Key(), err)
	}
	note := &ReviewNote{DecidedBy: ReviewedBy, By: by, JudgeWinner: old.Comparison.Winner, JudgeRawWinner: old.Comparison.RawWinner, JudgeConfidence: old.Comparison.Confidence}
	if prev := old.Comparison.Tribunal; prev != nil {
		note.Judge = prev.Judge
		if prev.Review != nil {
			// A person's earlier answer decided; the judge's verdict is the one it kept.
			note.JudgeWinner, note.JudgeRawWinner, note.JudgeConfidence, note.Judge = prev.Review.JudgeWinner, prev.Review.JudgeRawWinner, prev.Review.JudgeConfidence, prev.Review.Judge
		}
	}
	vote := events.Vote{Judge: events.JudgeInfo{Provider: PersonProvider, Model: by}, Order: "AB", Status: events.VoteOK,
		RawWinner: v.RawWinner, Confidence: v.Confidence, BiggestGap: v.BiggestGap}
	d := Derive(j.Spec, j.Iteration, []events.Vote{vote})
	if d.Decided == nil || d.Decided.Status != events.StatusCompared {
		return nil, fmt.Errorf("job %s: the review's answer did not derive a comparison", j.Key())
	}
	c := d.Comparison
	c.Tribunal = &ComparisonExtras{Review: note}
	j.Status = events.StatusCompared
	if err := setResult(j, Result{Comparison: c, Votes: old.Votes}); err != nil {
		return nil, err
	}
	return d.Decided, nil
}

// ReviewScale implements kind.Reviewing: an ab verdict has no scores.
func (Kind) ReviewScale() review.Scale { return review.Scale{} }

// ReviewTemplate implements kind.Reviewing: the seed's verdict object over the slots.
func (Kind) ReviewTemplate() string {
	return `{"raw_winner": "A | B | tie", "confidence": 0.0, "biggest_gap": "one sentence naming the largest difference"}`
}
