package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// fieldDiff is one value that differs between a record and its re-derivation, named by
// its path in the wire form.
type fieldDiff struct {
	path, recorded, derived string
}

// maxDiffs bounds the differences reported for one record, so one altered manifest
// cannot drown the report.
const maxDiffs = 20

// diffMsgpack compares two values by their msgpack form, the form the events travel in,
// so fields are named as on the wire ("ab.winner") and omitted empties compare equal.
//
// Equal wire bytes decode to equal trees, so they differ nowhere and the trees are not
// built: on a clean batch nearly every comparison ends there. Bytes that differ (a
// changed value, or only a map's key order) are compared tree by tree.
func diffMsgpack(recorded, derived any, skip ...string) ([]fieldDiff, error) {
	ra, err := msgpack.Marshal(recorded)
	if err != nil {
		return nil, fmt.Errorf("encode recorded value: %w", err)
	}
	rb, err := msgpack.Marshal(derived)
	if err != nil {
		return nil, fmt.Errorf("encode re-derived value: %w", err)
	}
	if bytes.Equal(ra, rb) {
		return nil, nil
	}
	a, err := decodeTree(ra)
	if err != nil {
		return nil, fmt.Errorf("decode recorded value: %w", err)
	}
	b, err := decodeTree(rb)
	if err != nil {
		return nil, fmt.Errorf("decode re-derived value: %w", err)
	}
	return diffTrees(a, b, skip), nil
}

func decodeTree(data []byte) (any, error) {
	var out any
	if err := msgpack.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// diffJSON compares two JSON documents, skipping the given paths.
func diffJSON(recorded, derived []byte, skip ...string) ([]fieldDiff, error) {
	var a, b any
	if err := json.Unmarshal(recorded, &a); err != nil {
		return nil, fmt.Errorf("parse recorded document: %w", err)
	}
	if err := json.Unmarshal(derived, &b); err != nil {
		return nil, fmt.Errorf("parse re-derived document: %w", err)
	}
	return diffTrees(a, b, skip), nil
}

func diffTrees(a, b any, skip []string) []fieldDiff {
	skipSet := map[string]bool{}
	for _, s := range skip {
		skipSet[s] = true
	}
	var out []fieldDiff
	diffTree("", normalize(a), normalize(b), skipSet, &out)
	return out
}

func msgpackTree(v any) (any, error) {
	data, err := msgpack.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeTree(data)
}

// normalize folds the number types a decoder may choose into int64 and float64, so two
// encodings of one value compare equal.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return int64(x)
	case float32:
		return float64(x)
	case float64:
		if x == float64(int64(x)) && x < 1<<53 && x > -(1<<53) {
			// JSON decodes every number as float64; msgpack keeps integers apart.
			return int64(x)
		}
	}
	return v
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func diffTree(path string, a, b any, skip map[string]bool, out *[]fieldDiff) {
	if skip[path] || len(*out) >= maxDiffs {
		return
	}
	if empty(a) && empty(b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			diffTree(join(path, k), am[k], bm[k], skip, out)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diffTree(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i], skip, out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fieldDiff{path: path, recorded: render(a), derived: render(b)})
	}
}

// join names field k of the value at path.
func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// render shows a value compactly, cut to a readable length.
func render(v any) string {
	if v == nil {
		return ""
	}
	var s string
	if str, ok := v.(string); ok {
		s = fmt.Sprintf("%q", str)
	} else if data, err := json.Marshal(v); err == nil {
		s = string(data)
	} else {
		s = fmt.Sprint(v)
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}
