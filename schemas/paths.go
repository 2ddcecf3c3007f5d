package schemas

import (
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Leaves flattens a validation error tree to the errors that say something concrete,
// ordered by instance location.
func Leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, Leaves(c)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Join(out[i].InstanceLocation, "/") < strings.Join(out[j].InstanceLocation, "/")
	})
	return out
}

// FieldPath turns an instance location's tokens into tribunal's field notation,
// "acs[2].threshold"; root names the document itself (no tokens).
func FieldPath(tokens []string, root string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	if b.Len() == 0 {
		return root
	}
	return b.String()
}
