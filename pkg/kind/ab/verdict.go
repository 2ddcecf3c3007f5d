package ab

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

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

// ErrVerdictSyntax is wrapped by ParseRawVerdict when the answer is not one JSON object
// (optionally inside a single ```json fence). It is a schema violation like a FieldError.
var ErrVerdictSyntax = errors.New("ab: verdict is not a single JSON object")

// canonicalRawWinner reports whether s is an acceptable raw_winner and returns it.
//
// Only the seed's exact spellings are accepted: "A", "B" or "tie" (seed 000: a
// `raw_winner` that is not `A`/`B`/`tie` is a schema violation, exit 3). A lower-case
// "a" or the comparator schema's "TIE" shows the model is not following the output
// contract it was given, as do whitespace, punctuation and longer forms ("Version A",
// "A."); role words ("ours", "reference") most of all, since a judge that answers with
// a role has seen something it must not see.
func canonicalRawWinner(s string) (string, bool) {
	switch s {
	case LabelA, LabelB, RawTie:
		return s, true
	}
	return "", false
}

// Validate checks the verdict against the schema and returns the first violation, in
// field order raw_winner, confidence, biggest_gap, as a *FieldError (nil when valid).
//
// raw_winner must be exactly A, B or tie (see Unshuffle, which accepts the same
// spellings). confidence must lie in [0,1]; NaN and infinities are violations, not
// values to clamp, because a verdict whose confidence is out of range says the judge did
// not understand the scale. biggest_gap must contain a non-blank character and at most
// strictjson.MaxText characters.
func (v RawVerdict) Validate() error {
	if _, ok := canonicalRawWinner(v.RawWinner); !ok {
		return &FieldError{Doc: fieldDoc, Field: "raw_winner", Value: strconv.Quote(v.RawWinner), Reason: `must be "A", "B" or "tie"`}
	}
	if math.IsNaN(v.Confidence) || v.Confidence < 0 || v.Confidence > 1 {
		return &FieldError{Doc: fieldDoc, Field: "confidence", Value: strconv.FormatFloat(v.Confidence, 'g', -1, 64), Reason: "must be a number in [0,1]"}
	}
	if strings.TrimSpace(v.BiggestGap) == "" {
		return &FieldError{Doc: fieldDoc, Field: "biggest_gap", Value: strconv.Quote(v.BiggestGap), Reason: "must not be empty"}
	}
	if reason := strictjson.TooLong(v.BiggestGap); reason != "" {
		return &FieldError{Doc: fieldDoc, Field: "biggest_gap", Value: strconv.Quote(strictjson.Clip(v.BiggestGap)), Reason: reason}
	}
	return nil
}

// verdictFields are the only keys a verdict object may have.
var verdictFields = []string{"raw_winner", "confidence", "biggest_gap", "reasoning"}

// foreignFieldHints explains keys that belong to a sibling schema, so the error tells the
// operator which prompt or model drifted.
var foreignFieldHints = map[string]string{
	"preferred": "unknown field (the comparator schema's name; this judge answers raw_winner)",
}

// ParseRawVerdict parses and validates the JSON a judge model returned.
//
// Accepted: one JSON object with the keys raw_winner (a string), confidence (a number)
// and biggest_gap (a string), and optionally reasoning (a string), surrounded by
// whitespace and optionally wrapped in one Markdown code fence whose info string is
// empty or "json" — models add fences even when told not to, and the fence carries no
// meaning. Rejected: prose before or after the object, a second value, duplicate or
// unknown keys, a confidence written as a string, null for any field.
//
// The comparator schema's field name "preferred" is deliberately not accepted as an
// alias. tribunal's prompt and structured-output schema name the field raw_winner, so
// an answer using another name did not follow the request it was given, and exit 3 is
// how that drift is made visible. Such a key gets a FieldError that names the sibling
// schema. "reasoning" is the comparator's name and means what it means there: the
// per-dimension summary, kept beside biggest_gap, never in its place.
//
// On success the verdict's RawWinner is "A", "B" or "tie". When only Validate fails,
// the decoded verdict is returned with the *FieldError so the caller can record what
// the judge said; on every other error the verdict is the zero value. Any error means
// the comparison is a schema violation.
func ParseRawVerdict(data []byte) (RawVerdict, error) {
	body, err := unfence(data)
	if err != nil {
		return RawVerdict{}, err
	}
	fields, err := decodeObject(body, ErrVerdictSyntax)
	if err != nil {
		var dup *duplicateKeyError
		if errors.As(err, &dup) {
			return RawVerdict{}, &FieldError{Doc: fieldDoc, Field: dup.key, Reason: "duplicate field"}
		}
		return RawVerdict{}, err
	}
	if k, reason, ok := fields.Unknown(verdictFields, foreignFieldHints); ok {
		return RawVerdict{}, &FieldError{Doc: fieldDoc, Field: k, Reason: reason}
	}

	var v RawVerdict
	if v.RawWinner, err = stringField(fields.Values, "raw_winner"); err != nil {
		return RawVerdict{}, err
	}
	if v.Confidence, err = numberField(fields.Values, "confidence"); err != nil {
		return RawVerdict{}, err
	}
	if v.BiggestGap, err = stringField(fields.Values, "biggest_gap"); err != nil {
		return RawVerdict{}, err
	}
	if _, ok := fields.Values["reasoning"]; ok {
		if v.Reasoning, err = stringField(fields.Values, "reasoning"); err != nil {
			return RawVerdict{}, err
		}
	}
	if err := v.Validate(); err != nil {
		return v, err
	}
	return v, nil
}

// unfence removes one code fence wrapping the whole answer (strictjson.Unfence).
func unfence(data []byte) ([]byte, error) {
	body, err := strictjson.Unfence(data)
	return body, asSyntax(err, ErrVerdictSyntax)
}

// object is a decoded JSON object whose values are still raw, with the key order kept
// so errors are reported in document order.
type object = strictjson.Object

// duplicateKeyError reports a key that occurs twice in one object.
type duplicateKeyError struct{ key string }

func (e *duplicateKeyError) Error() string { return fmt.Sprintf("ab: duplicate key %q", e.key) }

// decodeObject decodes exactly one JSON object and nothing after it (strictjson.Decode). A
// key that occurs twice is a *duplicateKeyError; every other failure wraps syntaxErr, so a
// verdict and a verify map each report their own kind of malformed input.
func decodeObject(body []byte, syntaxErr error) (object, error) {
	o, err := strictjson.Decode(body)
	var dup *strictjson.DuplicateKeyError
	if errors.As(err, &dup) {
		return object{}, &duplicateKeyError{key: dup.Key}
	}
	return o, asSyntax(err, syntaxErr)
}

// asSyntax rewraps a *strictjson.SyntaxError under this package's sentinel.
func asSyntax(err, sentinel error) error {
	var se *strictjson.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: %s", sentinel, se.Detail)
	}
	return err
}

// stringField decodes a required JSON string. null is rejected explicitly because
// encoding/json would leave the Go string empty without an error.
func stringField(values map[string]json.RawMessage, name string) (string, error) {
	raw, ok := values[name]
	if !ok {
		return "", &FieldError{Doc: fieldDoc, Field: name, Reason: "missing"}
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", &FieldError{Doc: fieldDoc, Field: name, Value: string(raw), Reason: "must be a JSON string"}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &FieldError{Doc: fieldDoc, Field: name, Value: string(raw), Reason: "must be a JSON string"}
	}
	return s, nil
}

// numberField decodes a required JSON number into a finite float64.
func numberField(values map[string]json.RawMessage, name string) (float64, error) {
	raw, ok := values[name]
	if !ok {
		return 0, &FieldError{Doc: fieldDoc, Field: name, Reason: "missing"}
	}
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return 0, &FieldError{Doc: fieldDoc, Field: name, Value: string(raw), Reason: "must be a JSON number"}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, &FieldError{Doc: fieldDoc, Field: name, Value: string(raw), Reason: "must be a finite number in [0,1]"}
	}
	return f, nil
}
