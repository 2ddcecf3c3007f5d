package batch

import (
	"sort"
	"strconv"

	"github.com/agnivade/levenshtein"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// knownKeys are the keys the schema s allows in the mapping at loc below it, sorted (nil
// when the schema there names none).
func knownKeys(s *jsonschema.Schema, loc []string) []string {
	deref := func(s *jsonschema.Schema) *jsonschema.Schema {
		for s != nil && s.Ref != nil && len(s.Properties) == 0 {
			s = s.Ref
		}
		return s
	}
	s = deref(s)
	for _, tok := range loc {
		if s == nil {
			return nil
		}
		if _, err := strconv.Atoi(tok); err == nil {
			if items, ok := s.Items.(*jsonschema.Schema); ok && s.Items2020 == nil {
				s = items
			} else {
				s = s.Items2020
			}
		} else {
			s = s.Properties[tok]
		}
		s = deref(s)
	}
	if s == nil {
		return nil
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// closest is the known key that key is most likely a typo of, or "" when none is close:
// within a third of the key's length in edits (at least two, so that a swap of two
// letters counts, and at most three), so that "criterian" suggests "criterion" but
// "colour" suggests nothing.
func closest(key string, known []string) string {
	best, bestDist := "", min(max(len(key)/3, 2), 3)+1
	for _, k := range known {
		if d := levenshtein.ComputeDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}
