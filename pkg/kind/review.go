package kind

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
)

// Reviewing is a kind whose judged jobs people can review (review.recorded): it reads a
// person's answer in its own verdict shape, with its own answer contract, and says what
// the answer and the judge's verdict mean in terms agreement can compare (pkg/review).
// A kind that is not Reviewing has every review refused.
type Reviewing interface {
	// JudgeVerdict is the job's judge verdict as a reviewer's answer is compared with
	// it, and the judge that gave it ("provider/model"); ok is false when the job has no
	// verdict a person could review (blocked, a schema violation, pending).
	JudgeVerdict(j *records.Job) (v review.Verdict, model string, ok bool)
	// ReviewAnswer checks a person's answer to the job against the kind's answer
	// contract (the same the judge's answers meet) and reads it. An error is the
	// person's mistake: the review is refused, never recorded as a violation.
	ReviewAnswer(j *records.Job, answer []byte) (review.Verdict, error)
	// Unsure are the judge's doubts about the job's verdict ("confidence 0.42 below
	// 0.75", "swap flip"), which send it to the queue when the batch asks.
	Unsure(j *records.Job) []string
	// DecideByReview makes the person's answer the job's outcome, the judge's verdict
	// kept beside it: the batch let people decide (events.ReviewSpec.Decides). It
	// changes j (its status, decision and result) and returns the decision.
	DecideByReview(j *records.Job, answer []byte, by string, ev events.Event) (*events.IterationDecided, error)
	// ReviewScale is the scale of the verdicts' scores (zero when they have none).
	ReviewScale() review.Scale
	// ReviewTemplate is the answer's shape as a reviewer fills it in: the kind's verdict
	// object with every field empty or named by its choices.
	ReviewTemplate() string
}

// CaseReviewing is a kind judged per case (equivalence: one judge call per case of the
// transfer set), whose people review each case as the judge judged it: a review names
// its case (events.ReviewRecorded.Case) and is read against that case's judge verdict.
// A kind that is CaseReviewing is not Reviewing: a review of its job as a whole is
// refused, as a review naming a case is refused by a kind reviewed whole.
type CaseReviewing interface {
	// ReviewCases are the job's cases a person could review, in the transfer set's
	// order: those whose judge gave a verdict (not blocked, not a schema violation).
	ReviewCases(j *records.Job) []string
	// CaseJudgeVerdict is the judge's verdict of one case and the judge that gave it;
	// ok is false when the case has none.
	CaseJudgeVerdict(j *records.Job, caseID string) (v review.Verdict, model string, ok bool)
	// CaseReviewAnswer checks a person's answer to one case against the kind's answer
	// contract and reads it; an error is the person's mistake.
	CaseReviewAnswer(j *records.Job, caseID string, answer []byte) (review.Verdict, error)
	// CaseUnsure are the judge's doubts about one case's verdict.
	CaseUnsure(j *records.Job, caseID string) []string
	// DecideByCaseReview makes the person's answer the case's verdict and derives the
	// job's outcome again from its cases, the judge's verdicts kept beside it: the batch
	// let people decide (events.ReviewSpec.Decides). It changes j and returns the
	// decision.
	DecideByCaseReview(j *records.Job, caseID string, answer []byte, by string, ev events.Event) (*events.IterationDecided, error)
	// ReviewScale is the scale of the verdicts' scores (zero when they have none).
	ReviewScale() review.Scale
	// ReviewTemplate is the answer's shape as a reviewer fills in one case.
	ReviewTemplate() string
}

// ReviewCalling is a Reviewing kind whose reviewed verdict is not its job's first
// call's (rubric: a view's loop judges it once per iteration and the verdict reviewed is
// the last): ReviewCall is the call whose messages the reviewer is shown, ok false when
// the job has none. A kind that is not ReviewCalling shows its job's first kept call.
type ReviewCalling interface {
	ReviewCall(j *records.Job) (c records.Call, ok bool)
}

// ReviewTemplating is a Reviewing kind whose answer shape depends on the job (rubric:
// the dimensions of the view's rubric): ReviewTemplateOf is the job's, used in place of
// ReviewTemplate wherever a job is at hand.
type ReviewTemplating interface {
	ReviewTemplateOf(j *records.Job) string
}

// DecidesRefusing is a Reviewing kind whose reviews measure its judge but never decide
// an outcome (rubric: a view's outcome is its loop's, over iterations and runs, and its
// person who decides is the HE-2 spot-check). RefuseDecides says why, starting with the
// batch key at fault ("review.decides: ..."). A batch that lets people decide blocks
// such a kind's ACs with the reason, and the rules refuse a deciding review of one.
type DecidesRefusing interface {
	RefuseDecides() string
}

// RefuseDecides is why k's reviews cannot decide an outcome, "" when they can.
func RefuseDecides(k Kind) string {
	if d, ok := k.(DecidesRefusing); ok {
		return d.RefuseDecides()
	}
	return ""
}

// ReviewTemplateOf is the answer shape a reviewer of j fills in: the kind's own for the
// job (ReviewTemplating), else its ReviewTemplate; "" for a kind people cannot review.
func ReviewTemplateOf(k Kind, j *records.Job) string {
	if t, ok := k.(ReviewTemplating); ok {
		return t.ReviewTemplateOf(j)
	}
	if t, ok := k.(interface{ ReviewTemplate() string }); ok {
		return t.ReviewTemplate()
	}
	return ""
}
