// Package strictjson decodes a model's answer as exactly one JSON object, the contract every
// judge and runner answer in tribunal follows. encoding/json alone is too lenient for it: it
// lets the last of two duplicate keys win, ignores trailing text and has no notion of the
// code fence models wrap answers in.
//
// Contract is an answer specified once: the kind's JSON Schema, compiled once, is what
// the model is sent and what its answer is validated by, after this package's syntactic
// front (one object, no repeated key, at most one fence where the kind allows it) has
// run. Violations are fielderr.Errors naming the field and what was wrong with it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// ErrNotObject is the one sentinel for text that is not exactly one JSON object, whichever
// kind's answer it was: every such error wraps it (a *SyntaxError, a Contract's error), so
// callers test errors.Is(err, ErrNotObject) and the message names the kind. It is Refused:
// the same text never becomes an object.
var ErrNotObject = errclass.New(errclass.Refused, "not a single JSON object")

// SyntaxError reports that the text is not exactly one JSON object (optionally inside one
// ```json fence). Detail says what is wrong, for the repair re-ask.
type SyntaxError struct{ Detail string }

// Error implements error.
func (e *SyntaxError) Error() string { return ErrNotObject.Error() + ": " + e.Detail }

// Unwrap makes a SyntaxError ErrNotObject (and so Refused) to errors.Is.
func (e *SyntaxError) Unwrap() error { return ErrNotObject }

// DuplicateKeyError reports a key that occurs twice in one object: two conflicting answers
// in one object are no answer. Path is the key's full path in a tree (DecodeTree).
type DuplicateKeyError struct{ Key, Path string }

// Error implements error.
func (e *DuplicateKeyError) Error() string {
	if e.Path != "" {
		return e.Path + ": duplicate key"
	}
	return fmt.Sprintf("duplicate key %q", e.Key)
}

// Object is one decoded JSON object whose values are still raw, with the keys in document
// order so errors can be reported in the order the model wrote them.
type Object struct {
	Order  []string
	Values map[string]json.RawMessage
}

// Unknown returns the first key, in document order, that is not in known, with the reason
// to give for it: its entry in hints (a key that is a known mistake, so the error can say
// how to fix it), else "unknown field". ok is false when every key is known.
func (o Object) Unknown(known []string, hints map[string]string) (key, reason string, ok bool) {
	for _, k := range o.Order {
		if slices.Contains(known, k) {
			continue
		}
		if reason, ok := hints[k]; ok {
			return k, reason, true
		}
		return k, "unknown field", true
	}
	return "", "", false
}

func syntax(format string, args ...any) error {
	return &SyntaxError{Detail: fmt.Sprintf(format, args...)}
}

// Unfence trims whitespace and removes one code fence that wraps the whole answer. Models add
// such fences even when told not to; a fence that wraps only part of the answer is prose
// around JSON and is rejected.
func Unfence(data []byte) ([]byte, error) {
	s := bytes.TrimSpace(data)
	if len(s) == 0 {
		return nil, syntax("empty answer")
	}
	const fence = "```"
	if !bytes.HasPrefix(s, []byte(fence)) {
		return s, nil
	}
	nl := bytes.IndexByte(s, '\n')
	if nl < 0 {
		return nil, syntax("code fence without a line break")
	}
	if info := strings.TrimSpace(string(s[len(fence):nl])); info != "" && !strings.EqualFold(info, "json") {
		return nil, syntax("code fence info string %q, want empty or json", info)
	}
	rest := s[nl+1:]
	if !bytes.HasSuffix(rest, []byte(fence)) {
		return nil, syntax("unterminated code fence")
	}
	rest = rest[:len(rest)-len(fence)]
	if before := bytes.TrimRight(rest, " \t"); len(before) > 0 && before[len(before)-1] != '\n' {
		return nil, syntax("closing code fence not on its own line")
	}
	body := bytes.TrimSpace(rest)
	if len(body) == 0 {
		return nil, syntax("empty code fence")
	}
	return body, nil
}

// Decode decodes exactly one JSON object and nothing after it. Errors are a *SyntaxError or
// a *DuplicateKeyError.
func Decode(body []byte) (Object, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return Object{}, syntax("%v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Object{}, syntax("starts with %v", tok)
	}
	obj := Object{Values: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Object{}, syntax("%v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return Object{}, syntax("object key %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Object{}, syntax("value of %q: %v", key, err)
		}
		if _, dup := obj.Values[key]; dup {
			return Object{}, &DuplicateKeyError{Key: key}
		}
		obj.Order = append(obj.Order, key)
		obj.Values[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return Object{}, syntax("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Object{}, syntax("trailing data after the object")
	}
	return obj, nil
}

// Clip bounds a value quoted in an error, since errors are logged and sent back to the model
// in the repair re-ask.
func Clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// MaxText bounds every free-text field of a judge's answer (a gap, a rationale, a
// behaviour delta, a note, a dimension's evidence), in characters. These fields name and
// quote what was seen; none needs more. Without a bound, a model talked into writing at
// length (an artifact may ask it to) would produce an event too large to publish; with
// it, that answer is a schema violation naming the field, like any other.
const MaxText = 2000

// TooLong returns why s is too long for a free-text field, or "" when it is not.
func TooLong(s string) string {
	if len(s) <= MaxText {
		return "" // fewer bytes than the limit: fewer characters too
	}
	if n := utf8.RuneCountInString(s); n > MaxText {
		return fmt.Sprintf("must be at most %d characters, not %d", MaxText, n)
	}
	return ""
}
