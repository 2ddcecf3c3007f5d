package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// TypeReviewRecorded is a person's review of a judged AC: their answer in the kind's
// own verdict shape (people in the loop, pkg/review). Its envelope names the job and the
// iteration reviewed.
const TypeReviewRecorded Type = "review.recorded"

// ReviewRecorded is a person's answer to a judged AC, given blind as the judge was. The
// reviewed job keeps the judge's verdict and gains this one; the batch's review setting
// (ReviewSpec.Decides) says whether it decides the outcome. Who answered comes from the
// credential that published it (the ingress, the console, the local CLI's user), when
// from the envelope's time.
type ReviewRecorded struct {
	Kind Kind `msgpack:"kind"`
	// Answer is the person's answer as JSON in the kind's verdict shape (ab: raw_winner,
	// confidence, biggest_gap over the blind slots), checked by the kind's answer
	// contract when the aggregator applies it.
	Answer string `msgpack:"answer"`
	// By is the reviewer.
	By string `msgpack:"by"`
	// Via is how the answer came: "import" (a file), "viewer" (`tribunal view`),
	// "console" (a shared console).
	Via string `msgpack:"via,omitempty"`
	// Case names the case of the transfer set the answer is about, for a kind judged
	// per case (equivalence: one judge call per case, so one review per case); empty for
	// a kind reviewed whole (ab, critic). The kind refuses a case it has not, or one
	// missing where it needs one.
	Case string `msgpack:"case,omitempty"`
}

// MaxReviewAnswer bounds a review's answer: a verdict object, not a document.
const MaxReviewAnswer = 16 << 10

// maxReviewer bounds a reviewer's name.
const maxReviewer = 256

// EventType implements Payload.
func (*ReviewRecorded) EventType() Type { return TypeReviewRecorded }

// Validate implements Payload.
func (p *ReviewRecorded) Validate() error {
	switch {
	case p.Kind == "":
		return missing("kind")
	case p.Answer == "":
		return missing("answer")
	case len(p.Answer) > MaxReviewAnswer:
		return invalid("answer", fmt.Sprintf("%d bytes; at most %d", len(p.Answer), MaxReviewAnswer))
	case !json.Valid([]byte(p.Answer)):
		return invalid("answer", "not JSON")
	case strings.TrimSpace(p.By) == "":
		return missing("by")
	case len(p.By) > maxReviewer:
		return invalid("by", fmt.Sprintf("at most %d bytes", maxReviewer))
	case len(p.Via) > 32:
		return invalid("via", "at most 32 bytes")
	case p.Case != "" && ValidateName(p.Case) != nil:
		return invalid("case", ValidateName(p.Case).Error())
	}
	return nil
}

// ReviewStep is the id step of a review: one per reviewer and answer, so the same answer
// given again is dropped as a duplicate and a changed answer is an event of its own.
func ReviewStep(by, answer string) string {
	h := sha256.Sum256([]byte(by + "\x00" + answer))
	return "review-" + hex.EncodeToString(h[:8])
}

// ReviewCaseStep is ReviewStep for an answer about one case (ReviewRecorded.Case): the
// same answer to two cases is two answers. Without a case it is ReviewStep, so the ids
// of reviews of kinds reviewed whole are as they were.
func ReviewCaseStep(by, caseID, answer string) string {
	if caseID == "" {
		return ReviewStep(by, answer)
	}
	h := sha256.Sum256([]byte(by + "\x00" + caseID + "\x00" + answer))
	return "review-" + hex.EncodeToString(h[:8])
}

// Step is the review's id step (ReviewCaseStep of its reviewer, case and answer), as
// the audit re-derives it.
func (p *ReviewRecorded) Step() string { return ReviewCaseStep(p.By, p.Case, p.Answer) }

// ReviewedStep is the id step of the decision a review made when the batch lets people
// decide: named by the review's event id, which is the decision's cause, so the audit
// derives the step from the decision's envelope.
func ReviewedStep(reviewID string) string { return "reviewed-" + reviewID }
