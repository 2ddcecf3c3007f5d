package ab

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

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
}

// FieldError is a schema violation in one field of a verdict. Any FieldError (and any
// other error from ParseRawVerdict) makes the comparison a schema violation, exit 3.
type FieldError struct {
	// Field is the JSON name of the offending field, e.g. "confidence".
	Field string
	// Value is the offending value as text ("" when the field is missing).
	Value string
	// Reason says what the field must be.
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("ab: verdict field %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("ab: verdict field %s = %s: %s", e.Field, e.Value, e.Reason)
}

// ErrVerdictSyntax is wrapped by ParseRawVerdict when the answer is not one JSON object
// (optionally inside a single ```json fence). It is a schema violation like a FieldError.
var ErrVerdictSyntax = errors.New("ab: verdict is not a single JSON object")

// canonicalRawWinner returns the canonical spelling of an acceptable raw_winner.
//
// The labels are matched without regard to case but otherwise exactly: the two schemas
// this judge descends from spell a tie "tie" and "TIE", and a lower-case "a" cannot mean
// anything but slot A, so rejecting case variants would turn a clear answer into a schema
// violation for no safety gain. Whitespace, punctuation and longer forms ("Version A",
// "A.") are not accepted: they show the model is not following the output contract. Role
// words ("ours", "reference") are rejected most of all, since a judge that answers with a
// role has seen something it must not see.
func canonicalRawWinner(s string) (string, bool) {
	switch {
	case strings.EqualFold(s, LabelA):
		return LabelA, true
	case strings.EqualFold(s, LabelB):
		return LabelB, true
	case strings.EqualFold(s, RawTie):
		return RawTie, true
	}
	return "", false
}

// Validate checks the verdict against the schema and returns the first violation, in
// field order raw_winner, confidence, biggest_gap, as a *FieldError (nil when valid).
//
// raw_winner must be A, B or tie in any letter case (see Unshuffle, which accepts the
// same spellings). confidence must lie in [0,1]; NaN and infinities are violations, not
// values to clamp, because a verdict whose confidence is out of range says the judge did
// not understand the scale. biggest_gap must contain a non-blank character and at most
// strictjson.MaxText characters.
func (v RawVerdict) Validate() error {
	if _, ok := canonicalRawWinner(v.RawWinner); !ok {
		return &FieldError{Field: "raw_winner", Value: strconv.Quote(v.RawWinner), Reason: `must be "A", "B" or "tie"`}
	}
	if math.IsNaN(v.Confidence) || v.Confidence < 0 || v.Confidence > 1 {
		return &FieldError{Field: "confidence", Value: strconv.FormatFloat(v.Confidence, 'g', -1, 64), Reason: "must be a number in [0,1]"}
	}
	if strings.TrimSpace(v.BiggestGap) == "" {
		return &FieldError{Field: "biggest_gap", Value: strconv.Quote(v.BiggestGap), Reason: "must not be empty"}
	}
	if reason := strictjson.TooLong(v.BiggestGap); reason != "" {
		return &FieldError{Field: "biggest_gap", Value: strconv.Quote(strictjson.Clip(v.BiggestGap)), Reason: reason}
	}
	return nil
}

// verdictFields are the only keys a verdict object may have.
var verdictFields = map[string]bool{"raw_winner": true, "confidence": true, "biggest_gap": true}

// foreignFieldHints explains keys that belong to a sibling schema, so the error tells the
// operator which prompt or model drifted.
var foreignFieldHints = map[string]string{
	"preferred": "unknown field (the comparator schema's name; this judge answers raw_winner)",
	"reasoning": "unknown field (the comparator schema's name; this judge answers biggest_gap)",
}

// ParseRawVerdict parses and validates the JSON a judge model returned.
//
// Accepted: one JSON object with exactly the keys raw_winner (a string), confidence (a
// number) and biggest_gap (a string), optionally surrounded by whitespace and optionally
// wrapped in one Markdown code fence whose info string is empty or "json" — models add
// fences even when told not to, and the fence carries no meaning. Rejected: prose before
// or after the object, a second value, duplicate or unknown keys, a confidence written
// as a string, null for any field.
//
// The comparator schema's field names "preferred" and "reasoning" are deliberately not
// accepted as aliases. tribunal's prompt and structured-output schema name the fields
// raw_winner and biggest_gap, so an answer using other names did not follow the request
// it was given, and exit 3 is how that drift is made visible. The names also do not mean
// the same: reasoning is a free-form justification while biggest_gap is the one gap a
// suggestion is built from, so mapping one to the other would quietly change what the
// manifest says. Such keys get a FieldError that names the sibling schema.
//
// On success the verdict's RawWinner is canonical ("A", "B" or "tie"). When only
// Validate fails, the decoded verdict is returned with the *FieldError so the caller can
// record what the judge said; on every other error the verdict is the zero value. Any
// error means the comparison is a schema violation.
func ParseRawVerdict(data []byte) (RawVerdict, error) {
	body, err := unfence(data)
	if err != nil {
		return RawVerdict{}, err
	}
	fields, err := decodeObject(body, ErrVerdictSyntax)
	if err != nil {
		var dup *duplicateKeyError
		if errors.As(err, &dup) {
			return RawVerdict{}, &FieldError{Field: dup.key, Reason: "duplicate field"}
		}
		return RawVerdict{}, err
	}
	for _, k := range fields.Order {
		if verdictFields[k] {
			continue
		}
		reason, ok := foreignFieldHints[k]
		if !ok {
			reason = "unknown field"
		}
		return RawVerdict{}, &FieldError{Field: k, Reason: reason}
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
	if err := v.Validate(); err != nil {
		return v, err
	}
	v.RawWinner, _ = canonicalRawWinner(v.RawWinner)
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
		return "", &FieldError{Field: name, Reason: "missing"}
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", &FieldError{Field: name, Value: string(raw), Reason: "must be a JSON string"}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &FieldError{Field: name, Value: string(raw), Reason: "must be a JSON string"}
	}
	return s, nil
}

// numberField decodes a required JSON number into a finite float64.
func numberField(values map[string]json.RawMessage, name string) (float64, error) {
	raw, ok := values[name]
	if !ok {
		return 0, &FieldError{Field: name, Reason: "missing"}
	}
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return 0, &FieldError{Field: name, Value: string(raw), Reason: "must be a JSON number"}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, &FieldError{Field: name, Value: string(raw), Reason: "must be a finite number in [0,1]"}
	}
	return f, nil
}
