package rubric

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
)

var (
	_ kind.Reviewing        = Kind{}
	_ kind.ReviewCalling    = Kind{}
	_ kind.ReviewTemplating = Kind{}
	_ kind.DecidesRefusing  = Kind{}
)

// Labels of a rubric verdict as agreement compares it: the verdict passes when every
// dimension reaches its threshold (derived from the scores, never the answer's claim).
const (
	LabelPass = "pass"
	LabelFail = "fail"
)

// lenience orders the labels by how favourable they are to the view.
var lenience = map[string]int{LabelPass: 1, LabelFail: 0}

// ScoreSteps is a dimension's score in whole steps of the scale (0, 0.5, 1 are 0, 1, 2),
// as agreement compares scores.
func ScoreSteps(score float64) int { return int(math.Round(score * 2)) }

// verdictOf reads a normalized verdict as agreement compares it.
func verdictOf(v argus.Verdict) review.Verdict {
	label := LabelFail
	if v.AllPass {
		label = LabelPass
	}
	out := review.Verdict{Label: label, Lenience: lenience[label], Scores: map[string]int{}}
	for n, d := range v.Dimensions {
		out.Scores[n] = ScoreSteps(d.Score)
	}
	return out
}

// reviewable is the verdict a person reviews of a rubric job: the last verdict judged of
// the view in this batch, the one its outcome rests on (a sign-off's last pass, the
// failures a needs_fixes hands the builder, a report-only run's one verdict), with the
// rubric it was checked against. A job whose outcome rests on no verdict (a view that
// needs context, one blocked, one still in its loop or waiting for its spot-check) has
// none; nor has a record from before the job kept its rubric's rules.
type reviewable struct {
	verdict IterationVerdict
	rubric  *argus.Rubric
	state   *State
}

func reviewableOf(j *records.Job) (*reviewable, error) {
	switch j.Status {
	case events.StatusSignedOff, events.StatusReported, events.StatusNeedsFixes, events.StatusBudgetExhausted:
	default:
		return nil, fmt.Errorf("job %s is %s: no verdict of the view to review", j.Key(), j.Status)
	}
	s, err := StateOf(j)
	if err != nil {
		return nil, err
	}
	if s == nil || len(s.Verdicts) == 0 {
		return nil, fmt.Errorf("job %s: the view was judged by no verdict in this batch", j.Key())
	}
	if len(s.Rubric) == 0 {
		return nil, fmt.Errorf("job %s: its record keeps no rubric rules (recorded before reviews of rubric views)", j.Key())
	}
	r, err := argus.RubricOfRules(s.Rubric)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", j.Key(), err)
	}
	return &reviewable{verdict: s.Verdicts[len(s.Verdicts)-1], rubric: r, state: s}, nil
}

// JudgeVerdict implements kind.Reviewing: the view's last judged verdict, labelled pass
// or fail as its scores derive it, with each dimension's score in steps of 0.5.
func (k Kind) JudgeVerdict(j *records.Job) (review.Verdict, string, bool) {
	rv, err := reviewableOf(j)
	if err != nil {
		return review.Verdict{}, "", false
	}
	model := ""
	if c, ok := k.ReviewCall(j); ok {
		model = c.Judge
	} else if len(j.Judges) > 0 {
		model = j.Judges[len(j.Judges)-1]
	}
	return verdictOf(rv.verdict.Verdict), model, true
}

// ReviewAnswer implements kind.Reviewing: the answer is a rubric verdict (seed 004's
// verdict schema) checked by the judge's own code: parsed by argus.ParseJudgeVerdict
// against the view's rubric with the reviewed verdict's identity put in place (the view
// and iteration are not the person's to state, as they are not the model's), then
// normalized by argus.NormalizeVerdict, which derives all_pass and failed_dimensions
// from the scores and the thresholds.
func (Kind) ReviewAnswer(j *records.Job, answer []byte) (review.Verdict, error) {
	rv, err := reviewableOf(j)
	if err != nil {
		return review.Verdict{}, err
	}
	v, err := CheckAnswer(rv.rubric, rv.verdict.Verdict, answer)
	if err != nil {
		return review.Verdict{}, err
	}
	return verdictOf(v), nil
}

// CheckAnswer checks a rubric verdict for the view and iteration of judged, against
// rubric r, as the judge's answer is checked (argus.ParseJudgeVerdict, then
// argus.NormalizeVerdict), and returns it normalized.
func CheckAnswer(r *argus.Rubric, judged argus.Verdict, answer []byte) (argus.Verdict, error) {
	id := argus.ViewIdentity{Iteration: judged.Iteration, Feature: judged.Feature, Target: judged.Target, State: judged.State,
		Appearance: judged.Appearance, ReferenceSource: judged.ReferenceSource}
	v, err := argus.ParseJudgeVerdict(r, id, answer)
	if err != nil {
		return argus.Verdict{}, err
	}
	chk, err := argus.NormalizeVerdict(*v, r)
	if err != nil {
		return argus.Verdict{}, err
	}
	return chk.Verdict, nil
}

// Unsure implements kind.Reviewing: the judge's all_pass or failed_dimensions
// contradicted its own scores on the reviewed verdict, the loop froze a dimension the
// judge kept failing, or the HE-2 spot-check of the sign-off named a dimension the judge
// got wrong.
func (Kind) Unsure(j *records.Job) []string {
	rv, err := reviewableOf(j)
	if err != nil {
		return nil
	}
	var out []string
	if rv.verdict.Disagreed {
		out = append(out, "the judge's all_pass or failed_dimensions contradicted its scores")
	}
	if f := rv.state.Loop.Frozen; len(f) > 0 {
		out = append(out, "frozen "+strings.Join(f, ", "))
	}
	if so := rv.state.SignOff; so != nil && so.HumanSpotcheck != "" && so.HumanSpotcheck != argus.SpotcheckPending && so.HumanSpotcheck != argus.SpotcheckApproved {
		out = append(out, "the HE-2 spot-check named "+so.HumanSpotcheck)
	}
	return out
}

// decidesRefusal is why a rubric review never decides.
const decidesRefusal = "review.decides: a rubric view's reviews measure its judge and decide nothing: its outcome is its loop's " +
	"(consecutive passes, frozen dimensions and budget, kept across runs and acted on), and its person who decides is the HE-2 spot-check"

// RefuseDecides implements kind.DecidesRefusing.
func (Kind) RefuseDecides() string { return decidesRefusal }

// DecideByReview implements kind.Reviewing: it is refused (RefuseDecides). A verdict
// the loop acted on (a streak counted, a dimension frozen, a render asked for, the
// builder told what to fix, the view's record carried to the next run) cannot be
// replaced afterwards without re-deriving every later step of the view, in this batch
// and the ones after it.
func (Kind) DecideByReview(j *records.Job, _ []byte, _ string, _ events.Event) (*events.IterationDecided, error) {
	return nil, fmt.Errorf("%w: job %s: %s", kind.ErrRefused, j.Key(), decidesRefusal)
}

// ReviewScale implements kind.Reviewing: scores 0, 0.5 and 1, in steps of 0.5.
func (Kind) ReviewScale() review.Scale { return review.Scale{Lo: 0, Hi: 2, Unit: 0.5} }

// ReviewCall implements kind.ReviewCalling: the call of the view's last judged verdict,
// the last call of the job (a rubric verdict is one call, and the job's calls are its
// verdicts' in order).
func (Kind) ReviewCall(j *records.Job) (records.Call, bool) {
	if _, err := reviewableOf(j); err != nil {
		return records.Call{}, false
	}
	for i := len(j.Calls) - 1; i >= 0; i-- {
		if j.Calls[i].Status == events.VoteOK {
			return j.Calls[i], true
		}
	}
	return records.Call{}, false
}

// ReviewTemplate implements kind.Reviewing: the answer shape for the built-in rubric;
// a queued view shows its own rubric's (ReviewTemplateOf).
func (Kind) ReviewTemplate() string { return answerShape(argus.DefaultRubric().Rules()) }

// ReviewTemplateOf implements kind.ReviewTemplating: seed 004's verdict object with the
// view's rubric dimensions, each anchored as the rubric says. The view's identity and
// iteration are left out: they are filled in, as for the judge.
func (k Kind) ReviewTemplateOf(j *records.Job) string {
	s, err := StateOf(j)
	if err != nil || s == nil || len(s.Rubric) == 0 {
		return k.ReviewTemplate()
	}
	return answerShape(s.Rubric)
}

// answerShape is seed 004's verdict object over rules, each value naming its choices.
func answerShape(rules []argus.DimensionRule) string {
	var b strings.Builder
	b.WriteString(`{"dimensions": {`)
	for i, r := range rules {
		if i > 0 {
			b.WriteString(", ")
		}
		name, _ := json.Marshal(r.Name)
		anchor, _ := json.Marshal(r.Anchor)
		fmt.Fprintf(&b, `%s: {"score": "0 | 0.5 | 1", "anchor": %s, "evidence": "the observation behind the score"}`, name, anchor)
	}
	b.WriteString(`}, "closer_to_reference_than_prev": "true | false | null", "all_pass": "true | false", "failed_dimensions": ["the dimensions below their threshold"], "notes": ""}`)
	return b.String()
}
