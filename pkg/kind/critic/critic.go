package critic

import (
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// MissingInput is the blocked reason, exactly as the seed words it, for a critic job
// whose task description or output is empty: there is nothing to score, so no judge is
// asked and the job is blocked, never passed.
const MissingInput = "missing input"

// ErrMissingInput is returned by CheckInputs; its message is exactly MissingInput.
var ErrMissingInput = errclass.New(errclass.Refused, MissingInput)

// CheckInputs returns ErrMissingInput when the task or the output is empty or only
// whitespace. Whitespace counts as missing because a judge shown an empty fence would be
// scoring nothing and could only guess.
func CheckInputs(task, output string) error {
	if strings.TrimSpace(task) == "" || strings.TrimSpace(output) == "" {
		return ErrMissingInput
	}
	return nil
}

// Derived verdicts. The thresholds are the seed's: quality 7 and up passes, 4 to 6 is
// sent back for revision, below 4 is rejected.
const (
	VerdictPass   = "pass"
	VerdictRevise = "revise"
	VerdictReject = "reject"
	// PassAt is the lowest quality that passes.
	PassAt = 7
	// ReviseAt is the lowest quality that is revised rather than rejected.
	ReviseAt = 4
)

// MaxScore is the top of every axis; slop is inverted, so 10 - slop turns it into a
// higher-is-better value for Derive.
const MaxScore = 10

// Derive computes quality = min(correctness, scope, 10 - slop) and the verdict from it.
// The weakest axis decides, so excellent correctness cannot buy back heavy slop or scope
// creep. It expects scores that passed Validate; for others it still returns the formula's
// value (which may fall outside 0-10) and the verdict for it, never a panic.
func Derive(correctness, slop, scope int) (quality int, verdict string) {
	quality = min(correctness, scope, MaxScore-slop)
	switch {
	case quality >= PassAt:
		verdict = VerdictPass
	case quality >= ReviseAt:
		verdict = VerdictRevise
	default:
		verdict = VerdictReject
	}
	return quality, verdict
}

// Answer is what a critic judge returns. Verdict and Quality are the judge's own claims
// (the seed's output format requires them, and ParseAnswer does); they are parsed so they
// can be compared, and never used as the result. They stay optional here because an
// answer rebuilt from an event recorded before they were required may lack them.
type Answer struct {
	Correctness int    `json:"correctness"`
	Slop        int    `json:"slop"`
	Scope       int    `json:"scope"`
	Rationale   string `json:"rationale"`
	// Verdict is the judge's claimed verdict, "" when it gave none.
	Verdict string `json:"verdict,omitempty"`
	// Quality is the judge's claimed quality, nil when it gave none.
	Quality *int `json:"quality,omitempty"`
}

// Result statuses: only StatusOK carries a verdict.
const (
	StatusOK = events.VoteOK
	// StatusBlocked: no judge was asked (missing input) or none could be reached.
	StatusBlocked = events.VoteBlocked
	// StatusSchemaViolation: the judge's answer stayed invalid after the repair re-ask.
	StatusSchemaViolation = events.VoteSchemaViolation
)

// Result is the recorded outcome of one critic job: the judge's scores, the derived
// quality and verdict, and how far the judge's own claims disagreed with the derivation.
type Result struct {
	Status events.VoteStatus `json:"status"`
	// Reason says why there is no verdict (e.g. "missing input"); empty when ok.
	Reason      string `json:"reason,omitempty"`
	Correctness int    `json:"correctness"`
	Slop        int    `json:"slop"`
	Scope       int    `json:"scope"`
	Rationale   string `json:"rationale,omitempty"`
	// Quality and Verdict are derived by Derive; Verdict is "" unless Status is ok.
	Quality int    `json:"quality"`
	Verdict string `json:"verdict"`
	// ClaimedVerdict and ClaimedQuality are what the judge said, kept for audit only.
	ClaimedVerdict string `json:"claimed_verdict,omitempty"`
	ClaimedQuality *int   `json:"claimed_quality,omitempty"`
	// Disagreements counts the claimed fields that differ from the derivation: verdict
	// and quality are counted separately, so 0, 1 or 2. A claim the judge did not make
	// is not a disagreement.
	Disagreements int `json:"disagreements"`
	// DisagreementFields names them ("verdict", "quality"), in that order.
	DisagreementFields []string `json:"disagreement_fields,omitempty"`
	// ReviewedBy is set when a person's review decided the result (the batch's review
	// decides): the scores above are then the person's, and Judge keeps the judge's.
	ReviewedBy string  `json:"reviewed_by,omitempty"`
	Judge      *Result `json:"judge,omitempty"`
}

// Check validates an answer, derives quality and verdict from its scores, and counts the
// judge's claims that disagree with the derivation. An invalid answer yields its
// validation error and a zero Result: a schema violation has no verdict to report.
func Check(a Answer) (Result, error) {
	if err := a.Validate(); err != nil {
		return Result{}, err
	}
	q, v := Derive(a.Correctness, a.Slop, a.Scope)
	r := Result{
		Status: StatusOK, Correctness: a.Correctness, Slop: a.Slop, Scope: a.Scope, Rationale: a.Rationale,
		Quality: q, Verdict: v, ClaimedVerdict: a.Verdict,
	}
	if a.Quality != nil {
		cq := *a.Quality
		r.ClaimedQuality = &cq
	}
	if a.Verdict != "" && a.Verdict != v {
		r.DisagreementFields = append(r.DisagreementFields, "verdict")
	}
	if a.Quality != nil && *a.Quality != q {
		r.DisagreementFields = append(r.DisagreementFields, "quality")
	}
	r.Disagreements = len(r.DisagreementFields)
	return r, nil
}

// Blocked is the result of a job that could not be judged, with the reason
// (MissingInput, or the provider's error).
func Blocked(reason string) Result {
	return Result{Status: StatusBlocked, Reason: reason}
}

// SchemaViolation is the result of a job whose answer stayed invalid.
func SchemaViolation(reason string) Result {
	return Result{Status: StatusSchemaViolation, Reason: reason}
}
