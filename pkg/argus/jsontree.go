package argus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The documents this package reads (specs, tokens, verdicts, probes) are written by
// people, generators and models. encoding/json's map decoding would hide three things
// that matter here: which of several duplicate keys won, the order keys were written in
// (appearances and rubric dimensions are reported in document order), and whether a key
// was absent or present with a zero value. So every document is first decoded into this
// small ordered tree and then checked by hand.

// maxJSONDepth bounds nesting so a hostile probe cannot exhaust memory through recursion.
// It matches the limit encoding/json applies to its own decoder.
const maxJSONDepth = 10000

// jsonMember is one key/value pair of a decoded object, in document order.
type jsonMember struct {
	Key string
	Val any
}

// jsonObject is a decoded JSON object. Values are nil, bool, json.Number, string, []any
// or jsonObject.
type jsonObject []jsonMember

// get returns the value of the first member named key.
func (o jsonObject) get(key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Val, true
		}
	}
	return nil, false
}

// duplicateKeyError reports a key that occurs twice in one object.
type duplicateKeyError struct {
	path string
}

// Error implements error.
func (e *duplicateKeyError) Error() string {
	return fmt.Sprintf("%s: duplicate key", e.path)
}

// decodeJSON decodes exactly one JSON value from data. With strict set, a key repeated
// inside one object is an error (a *duplicateKeyError naming its path); otherwise both
// members are kept.
func decodeJSON(data []byte, strict bool) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, "", 0, strict)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, path string, depth int, strict bool) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxJSONDepth {
		return nil, fmt.Errorf("nesting deeper than %d levels", maxJSONDepth)
	}
	switch d {
	case '{':
		obj := jsonObject{}
		var seen map[string]bool
		if strict {
			seen = map[string]bool{}
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key is %v, not a string", kt)
			}
			kp := joinKey(path, key)
			if strict {
				if seen[key] {
					return nil, &duplicateKeyError{path: kp}
				}
				seen[key] = true
			}
			v, err := decodeValue(dec, kp, depth+1, strict)
			if err != nil {
				return nil, err
			}
			obj = append(obj, jsonMember{Key: key, Val: v})
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec, joinIndex(path, len(arr)), depth+1, strict)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected delimiter %q", d)
}

var plainKey = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// joinKey extends a dotted path with an object key. Keys that would make the path
// ambiguous (dots, spaces, brackets) are quoted in brackets.
func joinKey(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex extends a path with an array index.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// kindOf names the JSON type of a decoded value for error messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case jsonObject:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// isComment reports whether a key is a free-form annotation ("_comment", "_note") that
// the hand-written companion files (tokens.json, contrast-pairs.json, rubric.json) may
// carry anywhere without it being read as data.
func isComment(key string) bool {
	return strings.HasPrefix(key, "_")
}

// numberValue converts a decoded number to float64.
func numberValue(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// intValue converts a decoded number to int when it is integral ("3" or "3.0").
func intValue(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 0); err == nil {
		return int(i), true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f > 1<<53 || f < -(1<<53) || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// stringList converts a decoded array of strings.
func stringList(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
