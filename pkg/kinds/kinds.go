// Package kinds is the registry of judge kinds: the one table that maps a kind's name to
// its implementation, its rules with its stages. The client and the services look a kind
// up here and dispatch to it; nothing else switches on a kind. The table registers every
// kind's rules with pkg/kind when the program starts, where the rules (pkg/rulebook) and
// the readers find them without importing any kind's stages. Adding a kind is one folder
// under pkg/kind and one line below (docs/adding-a-kind.md).
package kinds

import (
	"fmt"
	"maps"
	"sort"
	"sync/atomic"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	abstages "github.com/tribunal-dev/tribunal/pkg/kind/ab/stages"
	criticstages "github.com/tribunal-dev/tribunal/pkg/kind/critic/stages"
	equivalencestages "github.com/tribunal-dev/tribunal/pkg/kind/equivalence/stages"
	rubricstages "github.com/tribunal-dev/tribunal/pkg/kind/rubric/stages"
	"github.com/tribunal-dev/tribunal/pkg/stage"
)

// table is the table of kinds: each kind's rules with its stages.
var table = map[events.Kind]stage.Kind{
	events.KindAB:          abstages.Kind{},
	events.KindCritic:      criticstages.Kind{},
	events.KindEquivalence: equivalencestages.Kind{},
	events.KindRubric:      rubricstages.Kind{},
}

// current is the table in use: table, or a copy with a test double swapped in. Every
// event reads it, so it is swapped whole rather than locked.
var current atomic.Pointer[map[events.Kind]stage.Kind]

func init() { use(&table) }

// use makes t the table in use and registers its kinds' rules, in reporting order.
func use(t *map[events.Kind]stage.Kind) {
	current.Store(t)
	rules := make([]kind.Kind, 0, len(order))
	for _, name := range order {
		if k, ok := (*t)[name]; ok {
			rules = append(rules, rulesOf(k))
		}
	}
	kind.Register(rules...)
}

// rulesOf is the rules of a registered kind: a swapped kind's own (with the optional
// interfaces they implement), else the kind, whose stages embed its rules.
func rulesOf(k stage.Kind) kind.Kind {
	if s, ok := k.(swapped); ok {
		return s.Kind
	}
	return k
}

func registry() map[events.Kind]stage.Kind { return *current.Load() }

// Swap puts k's rules in place of those of the kind of the same name, its stages staying,
// and returns the function that puts the previous ones back. It exists for tests that
// change one rule and show that every part of tribunal which decides (the aggregator
// service, the audit, rejudge) follows it, because they all dispatch through this table.
// Tests that swap must not run in parallel.
func Swap(k kind.Kind) (restore func()) {
	prev := current.Load()
	next := maps.Clone(*prev)
	next[k.Name()] = swapped{Kind: k, Stages: (*prev)[k.Name()]}
	use(&next)
	return func() { use(prev) }
}

// swapped is a kind whose rules a test swapped (Swap): the new rules, the old stages.
type swapped struct {
	kind.Kind
	stage.Stages
}

// order is the order kinds are reported and their manifests announced in.
var order = []events.Kind{events.KindAB, events.KindCritic, events.KindEquivalence, events.KindRubric}

// Lookup returns the kind named k: its rules and its stages.
func Lookup(k events.Kind) (stage.Kind, error) {
	if impl, ok := registry()[k]; ok {
		return impl, nil
	}
	return nil, fmt.Errorf("%w: unknown judge kind %q", kind.ErrNotForKind, k)
}

// All returns every kind in reporting order.
func All() []stage.Kind {
	out := make([]stage.Kind, 0, len(order))
	for _, k := range order {
		out = append(out, registry()[k])
	}
	return out
}

// Names returns every kind's name, sorted.
func Names() []string {
	var out []string
	for k := range registry() {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// Looping reports whether jobs of k loop over iterations (kind.Looping).
func Looping(k events.Kind) (kind.Looping, bool) { return kind.LoopingOf(k) }
