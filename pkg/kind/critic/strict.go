package critic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// FieldError is one field of a critic answer that could not be accepted (fielderr.Error, scoped
// to "critic"). Any FieldError makes the answer a schema violation.
type FieldError = fielderr.Error

// fieldDoc scopes this package's field errors.
const fieldDoc = "critic"

// ErrSyntax is wrapped when an answer is not exactly one JSON object with nothing around
// it (a code fence included). It is a schema violation like a *FieldError.
var ErrSyntax = errors.New("critic: answer is not a single JSON object")

// object is a decoded flat JSON object with raw values and the keys in document order.
type object = strictjson.Object

// decodeObject decodes exactly one JSON object and nothing after it; a repeated key is a
// *FieldError, since encoding/json would silently keep the last of two conflicting scores.
func decodeObject(body []byte) (object, error) {
	o, err := strictjson.Decode(body)
	return o, asSchemaError(err)
}

// asSchemaError turns strictjson's errors into this package's schema violations, keeping
// the messages the repair re-ask sends back.
func asSchemaError(err error) error {
	var se *strictjson.SyntaxError
	var dup *strictjson.DuplicateKeyError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s", ErrSyntax, se.Detail)
	case errors.As(err, &dup):
		return &FieldError{Doc: fieldDoc, Field: dup.Key, Reason: "duplicate field"}
	}
	return err
}

// str decodes a JSON string; null is not a string.
func str(name string, raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &FieldError{Doc: fieldDoc, Field: name, Value: clip(string(raw)), Reason: "must be a JSON string"}
	}
	return s, nil
}

// whole decodes a whole number written as an integer literal: "7" (a string), 7.5 and
// 7.0 are all rejected, because the rubric is a scale of whole numbers.
func whole(name string, raw json.RawMessage) (int, error) {
	s := string(raw)
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return 0, &FieldError{Doc: fieldDoc, Field: name, Value: clip(s), Reason: "must be a whole JSON number from 0 to 10"}
	}
	if strings.ContainsAny(s, ".eE") {
		return 0, &FieldError{Doc: fieldDoc, Field: name, Value: clip(s), Reason: "must be a whole number from 0 to 10, not a fraction"}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, &FieldError{Doc: fieldDoc, Field: name, Value: clip(s), Reason: "must be a whole number from 0 to 10"}
	}
	return n, nil
}

func clip(s string) string { return strictjson.Clip(s) }

// tooLong returns why a free-text field is too long (strictjson.MaxText), or "".
func tooLong(s string) string { return strictjson.TooLong(s) }
