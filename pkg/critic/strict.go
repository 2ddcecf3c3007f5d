package critic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FieldError is a schema violation in one field of a critic answer. It names the field so
// the repair re-ask can tell the model exactly what to fix.
type FieldError struct {
	// Field is the JSON name of the offending field, e.g. "slop".
	Field string
	// Value is the offending value as the model wrote it ("" when missing).
	Value string
	// Reason says what the field must be.
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("critic: field %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("critic: field %s = %s: %s", e.Field, e.Value, e.Reason)
}

// ErrSyntax is wrapped when an answer is not exactly one JSON object (optionally in one
// ```json fence). It is a schema violation like a *FieldError.
var ErrSyntax = errors.New("critic: answer is not a single JSON object")

// unfence trims whitespace and removes one code fence that wraps the whole answer.
func unfence(data []byte) ([]byte, error) {
	s := bytes.TrimSpace(data)
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: empty answer", ErrSyntax)
	}
	const fence = "```"
	if !bytes.HasPrefix(s, []byte(fence)) {
		return s, nil
	}
	nl := bytes.IndexByte(s, '\n')
	if nl < 0 {
		return nil, fmt.Errorf("%w: code fence without a line break", ErrSyntax)
	}
	if info := strings.TrimSpace(string(s[len(fence):nl])); info != "" && !strings.EqualFold(info, "json") {
		return nil, fmt.Errorf("%w: code fence info string %q, want empty or json", ErrSyntax, info)
	}
	rest := s[nl+1:]
	if !bytes.HasSuffix(rest, []byte(fence)) {
		return nil, fmt.Errorf("%w: unterminated code fence", ErrSyntax)
	}
	rest = bytes.TrimRight(rest[:len(rest)-len(fence)], " \t")
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		return nil, fmt.Errorf("%w: closing code fence not on its own line", ErrSyntax)
	}
	body := bytes.TrimSpace(rest)
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty code fence", ErrSyntax)
	}
	return body, nil
}

// object is a decoded flat JSON object with raw values and the keys in document order.
type object struct {
	order  []string
	values map[string]json.RawMessage
}

// decodeObject decodes exactly one JSON object and nothing after it; a repeated key is a
// *FieldError, since encoding/json would silently keep the last of two conflicting scores.
func decodeObject(body []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return object{}, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return object{}, fmt.Errorf("%w: starts with %v", ErrSyntax, tok)
	}
	obj := object{values: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return object{}, fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		key, ok := tok.(string)
		if !ok {
			return object{}, fmt.Errorf("%w: object key %v", ErrSyntax, tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return object{}, fmt.Errorf("%w: value of %q: %v", ErrSyntax, key, err)
		}
		if _, dup := obj.values[key]; dup {
			return object{}, &FieldError{Field: key, Reason: "duplicate field"}
		}
		obj.order = append(obj.order, key)
		obj.values[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return object{}, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return object{}, fmt.Errorf("%w: trailing data after the object", ErrSyntax)
	}
	return obj, nil
}

// str decodes a JSON string; null is not a string.
func str(name string, raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &FieldError{Field: name, Value: clip(string(raw)), Reason: "must be a JSON string"}
	}
	return s, nil
}

// whole decodes a whole number written as an integer literal: "7" (a string), 7.5 and
// 7.0 are all rejected, because the rubric is a scale of whole numbers.
func whole(name string, raw json.RawMessage) (int, error) {
	s := string(raw)
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return 0, &FieldError{Field: name, Value: clip(s), Reason: "must be a whole JSON number from 0 to 10"}
	}
	if strings.ContainsAny(s, ".eE") {
		return 0, &FieldError{Field: name, Value: clip(s), Reason: "must be a whole number from 0 to 10, not a fraction"}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, &FieldError{Field: name, Value: clip(s), Reason: "must be a whole number from 0 to 10"}
	}
	return n, nil
}

func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
