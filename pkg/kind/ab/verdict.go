package ab

import (
	"errors"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// RawVerdict is a judge's answer over the blind slots, before un-shuffling. It carries
// no role: the judge never learns which slot is ours.
type RawVerdict struct {
	// RawWinner is "A", "B" or "tie".
	RawWinner string `json:"raw_winner"`
	// Confidence is the judge's confidence in RawWinner, in [0,1].
	Confidence float64 `json:"confidence"`
	// BiggestGap is one sentence naming the largest difference between the slots. It is
	// required even for a tie, where it says why no side could be preferred; without it
	// a suggestion would have nothing actionable to say.
	BiggestGap string `json:"biggest_gap"`
	// Reasoning is the judge's short per-dimension comparison (the comparator's
	// "summary of dimension-by-dimension comparison results"), kept with the verdict
	// for a reader. It is optional: the seed's verdict object has only the three fields
	// above, and answers recorded in that shape stay valid. Nothing is derived from it.
	Reasoning string `json:"reasoning,omitempty"`
}

// FieldError is one field of an ab verdict that could not be accepted (fielderr.Error, scoped
// to "ab verdict"). Any FieldError makes the answer a schema violation.
type FieldError = fielderr.Error

// fieldDoc scopes this package's field errors.
const fieldDoc = "ab verdict"

// verdictSchema is the whole answer contract; the model is sent it with every property
// required (strictjson.Contract.Sent), so reasoning is asked for and still optional here.
//
// raw_winner takes only the seed's exact spellings (seed 000: a raw_winner that is not
// A/B/tie is a schema violation, exit 3): "a", the comparator's "TIE", padded or longer
// forms show the model is not following its contract, role words ("ours") most of all,
// since a judge that answers with a role has seen something it must not see. A
// confidence outside [0,1] says the judge did not understand the scale, so it is refused,
// never clamped. The comparator's field name "preferred" is no alias: an answer using it
// did not follow the request it was given, and exit 3 is how that drift shows.
// "reasoning" is the comparator's per-dimension summary, kept beside biggest_gap, never
// in its place. biggest_gap is capped at strictjson.MaxText characters; reasoning is not,
// as it never was: a cap now would turn recorded votes with a longer one into schema
// violations when the aggregator or the audit re-checks them.
const verdictSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["raw_winner", "confidence", "biggest_gap"],
  "properties": {
    "raw_winner": {"type": "string", "enum": ["A", "B", "tie"]},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "biggest_gap": {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": "\\S"},
    "reasoning": {"type": "string"}
  }
}`

var verdictContract = strictjson.MustCompile(strictjson.Spec{
	Doc: fieldDoc, Schema: []byte(verdictSchema), Fence: strictjson.FenceTolerated,
	Hints: map[string]string{
		"preferred": "unknown field (the comparator schema's name; this judge answers raw_winner)",
	},
})

// canonicalRawWinner reports whether s is an acceptable raw_winner (exactly A, B or tie,
// as verdictSchema's enum) and returns it.
func canonicalRawWinner(s string) (string, bool) {
	switch s {
	case LabelA, LabelB, RawTie:
		return s, true
	}
	return "", false
}

// Validate checks a verdict (a recorded vote, or one built in code) against the answer
// schema and returns the first violation, in field order, as a *FieldError (nil when
// valid). NaN and infinities are violations, not values to clamp.
func (v RawVerdict) Validate() error {
	return strictjson.First(verdictContract.Validate(v))
}

// ParseRawVerdict parses and validates the JSON a judge model returned against the
// answer schema (verdictSchema).
//
// Accepted: one JSON object, surrounded by whitespace and optionally wrapped in one
// Markdown code fence whose info string is empty or "json" (models add fences even when
// told not to, and the fence carries no meaning). Rejected: prose before or after the
// object, a second value, duplicate keys, anything the schema refuses (an unknown key, a
// confidence written as a string, null for any field, ...).
//
// On success the verdict's RawWinner is "A", "B" or "tie". When only a value is wrong,
// the decoded verdict is returned with the *FieldError so the caller can record what
// the judge said; on every other error the verdict is the zero value. Any error means
// the comparison is a schema violation.
func ParseRawVerdict(data []byte) (RawVerdict, error) {
	var v RawVerdict
	err := verdictContract.Decode(data, &v)
	return v, strictjson.First(err)
}

// VerdictSchema is the structured-output schema of an ab verdict, as sent to the model.
func VerdictSchema() []byte { return verdictContract.Sent() }

// object is a decoded JSON object whose values are still raw, with the key order kept
// so errors are reported in document order (the verify map's reader).
type object = strictjson.Object

// duplicateKeyError reports a key that occurs twice in one object.
type duplicateKeyError struct{ key string }

func (e *duplicateKeyError) Error() string { return fmt.Sprintf("ab: duplicate key %q", e.key) }

// decodeObject decodes exactly one JSON object and nothing after it (strictjson.Decode). A
// key that occurs twice is a *duplicateKeyError; every other failure wraps syntaxErr.
func decodeObject(body []byte, syntaxErr error) (object, error) {
	o, err := strictjson.Decode(body)
	var dup *strictjson.DuplicateKeyError
	if errors.As(err, &dup) {
		return object{}, &duplicateKeyError{key: dup.Key}
	}
	var se *strictjson.SyntaxError
	if errors.As(err, &se) {
		return o, fmt.Errorf("%w: %s", syntaxErr, se.Detail)
	}
	return o, err
}
