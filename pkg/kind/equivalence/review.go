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
	count := map[string]int{}
	n := 0
	for _, v := range judgeCases(j) {
		if v.CaseID == caseID && v.Status == events.VoteOK {
			count[v.Verdict]++
			n++
		}
	}
	if len(count) < 2 {
		return nil
	}
	top := ""
	for v, c := range count {
		if c > count[top] || c == count[top] && v < top {
			top = v
		}
	}
	return []string{fmt.Sprintf("trial disagreement on the case: %d of %d trials gave %q", count[top], n, top)}
}

// ReviewScale implements kind.CaseReviewing: the verdict is a label; the directness
// scores are not compared.
func (Kind) ReviewScale() review.Scale { return review.Scale{} }

// ReviewTemplate implements kind.CaseReviewing: the seed's answer for one case.
func (Kind) ReviewTemplate() string {
	return `{"verdict": "equivalent | candidate-regressed | candidate-diverged", "behaviour_delta": "what the candidate lost or did differently (empty when equivalent)", "efficiency_signal": {"original_directness": 3, "candidate_directness": 3, "interpretation_notes": "the evidence behind the two directness scores"}}`
}

// ReviewedBy is CaseReview.DecidedBy: a person's review decided.
const ReviewedBy = "review"

// PersonProvider is the provider a person's answer names when their review decides.
const PersonProvider = "person"

// judgeCases are the judge's answers of a job before any review decided.
func judgeCases(j *records.Job) []events.CaseVote {
	if r, err := ResultOf(j); err == nil && r != nil && r.JudgeCases != nil {
		return r.JudgeCases
	}
	if d := decided(j); d != nil {
		return d.Cases
	}
	return nil
}

// DecideByCaseReview implements kind.CaseReviewing: the person's answer replaces the
// judge's for the case (in every trial of it, so a repeated job's majority is theirs),
// every case decided by a review before keeps its person's answer, and the report, the
// gate and the decision are derived again from the cases as from the judge's. The
// judge's answers stay in the result (JudgeCases), and each decided case names the
// judge's verdict it replaced.
func (Kind) DecideByCaseReview(j *records.Job, caseID string, answer []byte, by string, _ events.Event) (*events.IterationDecided, error) {
	a, err := ParseAnswer(answer)
	if err != nil {
		return nil, err
	}
	old, err := ResultOf(j)
	if err != nil || old == nil {
		return nil, fmt.Errorf("job %s has no equivalence result to review: %v", j.Key(), err)
	}
	base := judgeCases(j)
	// The judge's verdict and model for the case, from the report before any review
	// decided it.
	judgeVerdict, judgeName := "", ""
	for _, v := range base {
		if v.CaseID == caseID && v.Status == events.VoteOK {
			judgeName = v.Judge.Provider + "/" + v.Judge.Model
			break
		}
	}
	reviewed := append([]CaseReview(nil), old.Reviewed...)
	for _, c := range old.Report.Cases {
		if c.CaseID == caseID {
			judgeVerdict = c.Verdict
		}
	}
	i := -1
	for k, r := range reviewed {
		if r.Case == caseID {
			i, judgeVerdict, judgeName = k, r.JudgeVerdict, r.Judge
		}
	}
	note := CaseReview{Case: caseID, DecidedBy: ReviewedBy, By: by, Verdict: a.Verdict, JudgeVerdict: judgeVerdict, Judge: judgeName}
	if i >= 0 {
		reviewed[i] = note
	} else {
		reviewed = append(reviewed, note)
	}
	person := map[string]Answer{}
	by2 := map[string]string{}
	for _, r := range reviewed {
		person[r.Case], by2[r.Case] = Answer{}, r.By
	}
	// The answers of the cases decided before are in the job's decision already.
	if d := decided(j); d != nil {
		for _, v := range d.Cases {
			if _, ok := person[v.CaseID]; ok && v.Judge.Provider == PersonProvider {
				person[v.CaseID] = Answer{Verdict: v.Verdict, BehaviourDelta: v.BehaviourDelta, EfficiencySignal: EfficiencySignal{
					OriginalDirectness: v.Efficiency.OriginalDirectness, CandidateDirectness: v.Efficiency.CandidateDirectness, InterpretationNotes: v.Efficiency.InterpretationNotes}}
			}
		}
	}
	person[caseID] = a
	votes := make([]events.CaseVote, 0, len(base))
	for _, v := range base {
		pa, ok := person[v.CaseID]
		if !ok {
			votes = append(votes, v)
			continue
		}
		votes = append(votes, events.CaseVote{CaseID: v.CaseID, Judge: events.JudgeInfo{Provider: PersonProvider, Model: by2[v.CaseID]}, Status: events.VoteOK,
			Verdict: pa.Verdict, BehaviourDelta: pa.BehaviourDelta, Trial: v.Trial, Original: v.Original, Candidate: v.Candidate,
			Efficiency: events.EfficiencySignal{OriginalDirectness: pa.EfficiencySignal.OriginalDirectness, CandidateDirectness: pa.EfficiencySignal.CandidateDirectness,
				InterpretationNotes: pa.EfficiencySignal.InterpretationNotes}})
	}
	d := Derive(j.Spec, votes)
	if d.Decided == nil || d.Blocked != "" {
		return nil, fmt.Errorf("job %s: the review's answer did not derive a report: %s", j.Key(), d.Blocked)
	}
	j.Status, j.Judges = d.Status, d.Decided.Judges
	if err := setResult(j, Result{Report: d.Report, Transcripts: old.Transcripts, Reviewed: reviewed, JudgeCases: base}); err != nil {
		return nil, err
	}
	return d.Decided, nil
}
