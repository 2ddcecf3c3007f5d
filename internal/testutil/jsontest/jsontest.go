// Package jsontest checks the shape of JSON documents tribunal writes.
package jsontest

import (
	"encoding/json"
	"regexp"
	"sort"
)

var snakeKey = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// NonSnakeKeys lists the paths of the object keys of a JSON document that are not
// snake_case. allow names keys that are data rather than field names (the seed's label
// assignment {"A": ..., "B": ...}).
func NonSnakeKeys(data []byte, allow map[string]bool) ([]string, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	var bad []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !snakeKey.MatchString(k) && !allow[k] {
					bad = append(bad, path+"."+k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", v)
	sort.Strings(bad)
	return bad, nil
}
