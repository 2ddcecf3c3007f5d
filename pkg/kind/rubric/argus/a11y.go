package argus

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// IsIDKey reports whether a probe key holds an element id (the seed's a11y_assert.py
// ID_KEYS). The list is the sensor contract's (sensor.IsIDKey), as every sensor must keep
// such values whole instead of cutting them like text labels.
func IsIDKey(key string) bool { return sensor.IsIDKey(key) }

// HarvestIDs collects every element id in a probe document, whatever its shape: it
// walks all objects and arrays and takes the non-empty string value of any id key. A
// non-string value under an id key is walked like any other value. The result is
// sorted and free of duplicates. Duplicate keys in the probe are tolerated (each value
// is harvested): a sensor's quirks are not a reason to fail the gate.
func HarvestIDs(probe []byte) ([]string, error) {
	root, err := decodeJSON(probe, false)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	set := map[string]bool{}
	harvest(root, set)
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

func harvest(v any, set map[string]bool) {
	switch t := v.(type) {
	case jsonObject:
		for _, m := range t {
			if s, ok := m.Val.(string); ok && sensor.IsIDKey(m.Key) {
				if s != "" {
					set[s] = true
				}
				continue
			}
			harvest(m.Val, set)
		}
	case []any:
		for _, e := range t {
			harvest(e, set)
		}
	}
}

// A11yResult is the a11y_ids entry of a gate result.
type A11yResult struct {
	// Expected is the number of contract entries.
	Expected int `json:"expected"`
	// Present is how many entries were found.
	Present int `json:"present"`
	// Missing lists the entries not found, in contract order; never null.
	Missing []string `json:"missing"`
}

// Green reports whether every contract entry was found.
func (r A11yResult) Green() bool { return len(r.Missing) == 0 }

// MatchesID reports whether one contract entry is satisfied by a set of ids. An entry
// ending in '*' names a family and is satisfied by any id starting with the text
// before the star ("row.item.*" by "row.item.42"); a star elsewhere is literal.
func MatchesID(entry string, ids []string) bool {
	if prefix, ok := strings.CutSuffix(entry, "*"); ok {
		return slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, prefix) })
	}
	return slices.Contains(ids, entry)
}

// CheckA11yIDs compares a target's a11y contract with the ids harvested from its probe.
func CheckA11yIDs(contract, present []string) A11yResult {
	res := A11yResult{Expected: len(contract), Missing: []string{}}
	for _, entry := range contract {
		if MatchesID(entry, present) {
			res.Present++
		} else {
			res.Missing = append(res.Missing, entry)
		}
	}
	return res
}
