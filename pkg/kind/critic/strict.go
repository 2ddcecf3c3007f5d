package critic

import (
	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// FieldError is one field of a critic answer that could not be accepted (fielderr.Error, scoped
// to "critic"). Any FieldError makes the answer a schema violation.
type FieldError = fielderr.Error

// fieldDoc scopes this package's field errors.
const fieldDoc = "critic"

// answerSchema is the whole contract of a critic answer, sent to the model as it is.
//
// It is the seed's output object: "Return only this JSON object, no prose, no code fence:
// {correctness, slop, scope, verdict, quality, rationale}". Every key is required:
// verdict and quality are the judge's claims and never the result (Check derives both and
// counts disagreements), but an answer without them did not follow the format. Scores are
// whole numbers from 0 to 10 written as integers: "7" (a string), 7.5 and 7.0 are all
// refused, because the rubric is a scale of whole numbers and a model writing 7.0 is not
// using it. A claim outside the scale shows the judge is not following the rubric at all.
const answerSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["correctness", "slop", "scope", "verdict", "quality", "rationale"],
  "properties": {
    "correctness": {"type": "integer", "minimum": 0, "maximum": 10},
    "slop": {"type": "integer", "minimum": 0, "maximum": 10},
    "scope": {"type": "integer", "minimum": 0, "maximum": 10},
    "verdict": {"type": "string", "enum": ["pass", "revise", "reject"]},
    "quality": {"type": "integer", "minimum": 0, "maximum": 10},
    "rationale": {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": "\\S"}
  }
}`

var answerContract = strictjson.MustCompile(strictjson.Spec{
	Doc: fieldDoc, Schema: []byte(answerSchema), Fence: strictjson.FenceRefused, WholeLiterals: true,
	// The claims' absence is reported last, so a score out of range is reported as such
	// rather than hidden behind a missing claim; an answer recorded before the claims
	// were required stays valid.
	LateRequired: []string{"verdict", "quality"},
	Hints: map[string]string{
		"error":     "unknown field (the judge reported an error instead of scores; tribunal checks for missing input before asking)",
		"reason":    "unknown field (the contract calls it rationale)",
		"reasoning": "unknown field (the contract calls it rationale)",
	},
	Reasons: map[string]string{
		"verdict enum":        `must be "pass", "revise" or "reject" (the seed's verdicts; "ship" is not one)`,
		"verdict required":    `missing (the output object carries "verdict": "pass" | "revise" | "reject")`,
		"quality required":    `missing (the output object carries "quality": 0-10)`,
		"rationale minLength": "must give the evidence for the scores",
		"rationale pattern":   "must give the evidence for the scores",
	},
})

// AnswerSchema is the structured-output schema of a critic answer, as sent to the model.
func AnswerSchema() []byte { return answerContract.Sent() }

// Validate checks an answer (a recorded one, or one built in code) against the answer
// schema and returns the first violation as a *FieldError, in the order correctness,
// slop, scope, verdict, quality, rationale. The claims may be absent: an answer recorded
// before they were required lacks them.
func (a Answer) Validate() error { return strictjson.First(answerContract.Validate(a)) }

// ParseAnswer parses and validates the text a critic judge returned against the answer
// schema (answerSchema): exactly one JSON object, surrounded by nothing but whitespace,
// with all six keys. Rejected as a *FieldError naming the field: a missing or unknown
// key, a duplicate key, null, a score written as a string ("7"), a fraction (7.5, 7.0), a
// score outside 0-10, a claimed verdict other than pass / revise / reject, a blank
// rationale. Text that is not one JSON object, a code fence included, wraps
// strictjson.ErrNotObject.
//
// When only a value is wrong the decoded answer is returned with the error, for the
// record; it must never be used as a score.
func ParseAnswer(data []byte) (Answer, error) {
	var a Answer
	err := answerContract.Decode(data, &a)
	return a, strictjson.First(err)
}
