package equivalence

import (
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
)

var _ kind.CaseReviewing = Kind{}

// lenience orders the verdicts by how favourable they are to the candidate: a judge
// whose verdict is more lenient than the person's is too lenient there.
var lenience = map[string]int{VerdictEquivalent: 2, VerdictDiverged: 1, VerdictRegressed: 0}

// judgedCase is one case's judge verdict as its report row has it (the trials' majority
// when repeated), and the judge that gave it.
func judgedCase(j *records.Job, caseID string) (CaseResult, string, bool) {
	if j.Status != events.StatusCompared && j.Status != events.StatusSchemaViolation {
		return CaseResult{}, "", false
	}
	r, err := ResultOf(j)
	if err != nil || r == nil {
		return CaseResult{}, "", false
	}
	for _, c := range r.Report.Cases {
		if c.CaseID != caseID {
			continue
		}
		if !c.valid() {
			return CaseResult{}, "", false
		}
		model := ""
		if d := decided(j); d != nil {
			for _, v := range d.Cases {
				if v.CaseID == caseID {
					model = v.Judge.Provider + "/" + v.Judge.Model
					break
				}
			}
		}
		return c, model, true
	}
	return CaseResult{}, "", false
}

func decided(j *records.Job) *Decided {
	if j.Decided == nil {
		return nil
	}
	return DecidedOf(j.Decided.KindPart)
}

// ReviewCases implements kind.CaseReviewing: the cases of the report with a valid
// verdict, in transfer-set order.
func (Kind) ReviewCases(j *records.Job) []string {
	r, err := ResultOf(j)
	if err != nil || r == nil || (j.Status != events.StatusCompared && j.Status != events.StatusSchemaViolation) {
		return nil
	}
	var out []string
	for _, c := range r.Report.Cases {
		if c.valid() {
			out = append(out, c.CaseID)
		}
	}
	return out
}

// CaseJudgeVerdict implements kind.CaseReviewing: the case's verdict as the label
// (equivalent, candidate-diverged, candidate-regressed), ordered by lenience.
func (Kind) CaseJudgeVerdict(j *records.Job, caseID string) (review.Verdict, string, bool) {
	c, model, ok := judgedCase(j, caseID)
	if !ok {
		return review.Verdict{}, "", false
	}
	return review.Verdict{Label: c.Verdict, Lenience: lenience[c.Verdict]}, model, true
}

// CaseReviewAnswer implements kind.CaseReviewing: the answer is an equivalence answer
// (verdict, behaviour_delta, efficiency_signal) held to the judge's own contract, for a
// case of the job the judge gave a verdict.
func (k Kind) CaseReviewAnswer(j *records.Job, caseID string, answer []byte) (review.Verdict, error) {
	if _, _, ok := judgedCase(j, caseID); !ok {
		return review.Verdict{}, fmt.Errorf("case %q: no case of %s with a judge verdict to review (cases: %s)", caseID, j.ACID, strings.Join(k.ReviewCases(j), ", "))
	}
	a, err := ParseAnswer(answer)
	if err != nil {
		return review.Verdict{}, err
	}
	return review.Verdict{Label: a.Verdict, Lenience: lenience[a.Verdict]}, nil
}

// CaseUnsure implements kind.CaseReviewing: the case's trials did not all give one
// verdict.
func (Kind) CaseUnsure(j *records.Job, caseID string) []string {
	d := decided(j)
	if d == nil {
		return nil
	}
	count := map[string]int{}
	n := 0
	for _, v := range d.Cases {
		if v.CaseID == caseID && v.Status == events.VoteOK {
			count[v.Verdict]++
			n++
		}
	}
	if len(count) < 2 {
		return nil
	}
	c, _, _ := judgedCase(j, caseID)
	return []string{fmt.Sprintf("trial disagreement on the case: %d of %d trials gave %q", count[c.Verdict], n, c.Verdict)}
}

// ReviewScale implements kind.CaseReviewing: the verdict is a label; the directness
// scores are not compared.
func (Kind) ReviewScale() review.Scale { return review.Scale{} }

// ReviewTemplate implements kind.CaseReviewing: the seed's answer for one case.
func (Kind) ReviewTemplate() string {
	return `{"verdict": "equivalent | candidate-regressed | candidate-diverged", "behaviour_delta": "what the candidate lost or did differently (empty when equivalent)", "efficiency_signal": {"original_directness": 3, "candidate_directness": 3, "interpretation_notes": "the evidence behind the two directness scores"}}`
}
