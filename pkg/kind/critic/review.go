package critic

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// lenience orders the verdicts by how favourable they are to the output.
var lenience = map[string]int{VerdictPass: 2, VerdictRevise: 1, VerdictReject: 0}

func verdictOf(r Result) review.Verdict {
	return review.Verdict{Label: r.Verdict, Lenience: lenience[r.Verdict],
		Scores: map[string]int{"correctness": r.Correctness, "slop": r.Slop, "scope": r.Scope}}
}

// JudgeVerdict implements kind.Reviewing: the derived verdict and the three scores.
func (Kind) JudgeVerdict(j *records.Job) (review.Verdict, string, bool) {
	r, err := ResultOf(j)
	if err != nil || r == nil || j.Status != events.StatusCompared || r.Status != StatusOK {
		return review.Verdict{}, "", false
	}
	if r.Judge != nil {
		r = r.Judge
	}
	model := ""
	if len(j.Judges) > 0 {
		model = j.Judges[0]
	}
	return verdictOf(*r), model, true
}

// ReviewAnswer implements kind.Reviewing: the answer is a critic answer in the seed's
// output format (whole scores 0-10, the verdict and quality claimed, a rationale),
// checked by the judge's own contract; its verdict is derived from its scores as the
// judge's is.
func (Kind) ReviewAnswer(_ *records.Job, answer []byte) (review.Verdict, error) {
	a, err := ParseAnswer(answer)
	if err != nil {
		return review.Verdict{}, err
	}
	r, err := Check(a)
	if err != nil {
		return review.Verdict{}, err
	}
	return verdictOf(r), nil
}

// Unsure implements kind.Reviewing: a quality one point from a verdict line, the judge's
// own claims disagreeing with its scores, trials that did not agree.
func (Kind) Unsure(j *records.Job) []string {
	r, err := ResultOf(j)
	if err != nil || r == nil || j.Status != events.StatusCompared || r.Status != StatusOK {
		return nil
	}
	var out []string
	for _, line := range []int{PassAt, ReviseAt} {
		if r.Quality == line || r.Quality == line-1 {
			out = append(out, fmt.Sprintf("quality %d next to the line at %d", r.Quality, line))
			break
		}
	}
	if r.Disagreements > 0 {
		out = append(out, "the judge's own claims disagree with its scores")
	}
	return append(out, trials.Unsure(j.Decided)...)
}

// DecideByReview implements kind.Reviewing: the person's scores are the result, derived
// as the judge's are; the judge's result is kept beside them.
func (Kind) DecideByReview(j *records.Job, answer []byte, by string, _ events.Event) (*events.IterationDecided, error) {
	a, err := ParseAnswer(answer)
	if err != nil {
		return nil, err
	}
	r, err := Check(a)
	if err != nil {
		return nil, err
	}
	old, err := ResultOf(j)
	if err != nil || old == nil {
		return nil, fmt.Errorf("job %s has no critic result to review: %v", j.Key(), err)
	}
	if old.Judge != nil {
		old = old.Judge
	}
	r.ReviewedBy, r.Judge = by, old
	d := &events.IterationDecided{Kind: events.KindCritic, ACID: j.ACID, Final: true, Status: events.StatusCompared, Judges: []string{"person/" + by},
		Disagreements: r.Disagreements, KindPart: &Decided{Correctness: r.Correctness, Slop: r.Slop, Scope: r.Scope, Quality: r.Quality,
			Verdict: r.Verdict, Rationale: r.Rationale, Disagreements: r.Disagreements}}
	j.Status = events.StatusCompared
	if err := setResult(j, r); err != nil {
		return nil, err
	}
	return d, nil
}

// ReviewScale implements kind.Reviewing: whole scores 0-10.
func (Kind) ReviewScale() review.Scale { return review.Scale{Lo: 0, Hi: MaxScore, Unit: 1} }

// ReviewTemplate implements kind.Reviewing: the seed's critic output format.
func (Kind) ReviewTemplate() string {
	return `{"correctness": 0, "slop": 0, "scope": 0, "verdict": "pass | revise | reject", "quality": 0, "rationale": ""}`
}
