// Package kinds is the registry of judge kinds: the one table that maps a kind's name to
// its implementation. The client, the services and the rules look a kind up here and
// dispatch to it; nothing else switches on a kind. Adding a kind is one folder under
// pkg/kind and one line below (docs/adding-a-kind.md).
package kinds

import (
	"fmt"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
)

// registry is the table of kinds.
var registry = map[events.Kind]kind.Kind{
	events.KindAB:          ab.Kind{},
	events.KindCritic:      critic.Kind{},
	events.KindEquivalence: equivalence.Kind{},
	events.KindRubric:      rubric.Kind{},
}

// order is the order kinds are reported and their manifests announced in.
var order = []events.Kind{events.KindAB, events.KindCritic, events.KindEquivalence, events.KindRubric}

// Lookup returns the kind named k.
func Lookup(k events.Kind) (kind.Kind, error) {
	if impl, ok := registry[k]; ok {
		return impl, nil
	}
	return nil, fmt.Errorf("%w: unknown judge kind %q", kind.ErrNotForKind, k)
}

// All returns every kind in reporting order.
func All() []kind.Kind {
	out := make([]kind.Kind, 0, len(order))
	for _, k := range order {
		out = append(out, registry[k])
	}
	return out
}

// Names returns every kind's name, sorted.
func Names() []string {
	var out []string
	for k := range registry {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// Looping reports whether jobs of k loop over iterations (kind.Looping).
func Looping(k events.Kind) (kind.Looping, bool) {
	l, ok := registry[k].(kind.Looping)
	return l, ok
}
