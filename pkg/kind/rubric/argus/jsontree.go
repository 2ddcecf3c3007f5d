package argus

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// The documents this package reads (specs, tokens, verdicts, probes) are written by
// people, generators and models: each is decoded into strictjson's ordered tree and then
// checked by hand (appearances and rubric dimensions are reported in document order).

// jsonMember and jsonObject are strictjson's ordered tree, under this package's names.
type (
	jsonMember = strictjson.Member
	jsonObject = strictjson.Members
)

// duplicateKeyError reports a key that occurs twice in one object.
type duplicateKeyError = strictjson.DuplicateKeyError

func decodeJSON(data []byte, strict bool) (any, error) { return strictjson.DecodeTree(data, strict) }

func joinKey(path, key string) string { return strictjson.JoinKey(path, key) }

func joinIndex(path string, i int) string { return strictjson.JoinIndex(path, i) }

func kindOf(v any) string { return strictjson.KindOf(v) }

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
