package equivalence

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// FieldError is one field of an equivalence answer or transcript that could not be accepted (fielderr.Error, scoped
// to "equivalence"). Any FieldError makes the answer a schema violation.
//
// The judge's answer is checked by its schema (answerSchema); the helpers below read the
// runner's transcript (ParseRunnerOutput).
type FieldError = fielderr.Error

// fieldDoc scopes this package's field errors.
const fieldDoc = "equivalence"

// unfence removes one code fence wrapping the whole answer (strictjson.Unfence).
func unfence(data []byte) ([]byte, error) {
	body, err := strictjson.Unfence(data)
	var se *strictjson.SyntaxError
	if errors.As(err, &se) {
		return nil, fmt.Errorf("%s: %w", fieldDoc, se)
	}
	return body, err
}

// object is one decoded JSON object whose values are still raw. path prefixes every field
// name in errors so that nested fields are reported by their full path.
type object struct {
	strictjson.Object
	path string
}

// decodeTop decodes a model's whole answer (in at most one code fence) as one object with
// nothing after it and no key but allowed (only).
func decodeTop(data []byte, allowed []string, hints map[string]string) (object, error) {
	body, err := unfence(data)
	if err != nil {
		return object{}, err
	}
	o, err := decodeObject(body, "", true)
	if err != nil {
		return object{}, err
	}
	return o, o.only(allowed, hints)
}

// decodeObject decodes exactly one JSON object. A key that occurs twice is a *FieldError:
// encoding/json would let the last one win silently, and two conflicting answers in one
// object are no answer. top selects syntax errors (the model's text is not JSON at all)
// over field errors (a nested value is not an object).
func decodeObject(body []byte, path string, top bool) (object, error) {
	o, err := strictjson.Decode(body)
	var se *strictjson.SyntaxError
	var dup *strictjson.DuplicateKeyError
	switch {
	case errors.As(err, &dup):
		return object{}, &FieldError{Doc: fieldDoc, Field: path + dup.Key, Reason: "duplicate field"}
	case errors.As(err, &se) && top:
		return object{}, fmt.Errorf("%s: %w", fieldDoc, se)
	case err != nil:
		return object{}, &FieldError{Doc: fieldDoc, Field: strings.TrimSuffix(path, "."), Value: clip(string(body)), Reason: "must be a JSON object"}
	}
	return object{Object: o, path: path}, nil
}

// only rejects, in document order, the first key that is not in allowed. hints explain
// keys that are known mistakes, so the error says how to fix them.
func (o object) only(allowed []string, hints map[string]string) error {
	if k, reason, ok := o.Unknown(allowed, hints); ok {
		return &FieldError{Doc: fieldDoc, Field: o.path + k, Reason: reason}
	}
	return nil
}

// str decodes a required JSON string. null is rejected explicitly because encoding/json
// would turn it into "" without complaint.
func (o object) str(name string) (string, error) {
	raw, ok := o.Values[name]
	if !ok {
		return "", &FieldError{Doc: fieldDoc, Field: o.path + name, Reason: "missing"}
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &FieldError{Doc: fieldDoc, Field: o.path + name, Value: clip(string(raw)), Reason: "must be a JSON string"}
	}
	return s, nil
}

// obj decodes a required nested object.
func (o object) obj(name string) (object, error) {
	raw, ok := o.Values[name]
	if !ok {
		return object{}, &FieldError{Doc: fieldDoc, Field: o.path + name, Reason: "missing"}
	}
	return decodeObject(raw, o.path+name+".", false)
}

// array decodes a required JSON array (never null: "nothing" is written as []).
func (o object) array(name string) ([]json.RawMessage, error) {
	raw, ok := o.Values[name]
	if !ok {
		return nil, &FieldError{Doc: fieldDoc, Field: o.path + name, Reason: "missing"}
	}
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, &FieldError{Doc: fieldDoc, Field: o.path + name, Value: clip(string(raw)), Reason: "must be a JSON array ([] when there is nothing to report)"}
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	return items, nil
}

// strs decodes a required array of strings; the result is never nil.
func (o object) strs(name string) ([]string, error) {
	items, err := o.array(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for i, raw := range items {
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, &FieldError{Doc: fieldDoc, Field: fmt.Sprintf("%s%s[%d]", o.path, name, i), Value: clip(string(raw)), Reason: "must be a JSON string"}
		}
		out = append(out, s)
	}
	return out, nil
}

// clip bounds a value quoted in an error, since errors are logged and sent back to the
// model in the repair re-ask.
func clip(s string) string { return strictjson.Clip(s) }

// blank reports a string with no visible content.
func blank(s string) bool { return strings.TrimSpace(s) == "" }
