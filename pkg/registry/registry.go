// Package registry is the registry of judge kinds: the one table that maps a kind's name to
// its implementation, its rules with its stages. The client and the services look a kind
// up here and dispatch to it; nothing else switches on a kind. The table registers every
// kind's rules with pkg/kind when the program starts, where the rules (pkg/rulebook) and
// the readers find them without importing any kind's stages. Adding a kind is one folder
// under pkg/kind and one line below (docs/adding-a-kind.md).
package registry

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	abstages "github.com/tribunal-dev/tribunal/pkg/kind/ab/stages"
	criticstages "github.com/tribunal-dev/tribunal/pkg/kind/critic/stages"
	equivalencestages "github.com/tribunal-dev/tribunal/pkg/kind/equivalence/stages"
	rubricstages "github.com/tribunal-dev/tribunal/pkg/kind/rubric/stages"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

// table is the table of kinds, in the order kinds are reported and their manifests
// announced: each kind's rules with its stages.
var table = []stage.Kind{
	abstages.Kind{},
	criticstages.Kind{},
	equivalencestages.Kind{},
	rubricstages.Kind{},
}

// registry is the table in use: the table, a kind added (Add), or a test's rules swapped
// in (Swap).
type registry struct {
	byName map[events.Kind]stage.Kind
	order  []events.Kind
}

// current is the registry in use. Every event reads it, so it is swapped whole rather
// than locked; changes are serialized by changing.
var (
	current  atomic.Pointer[registry]
	changing sync.Mutex
)

func init() {
	r := &registry{byName: map[events.Kind]stage.Kind{}}
	for _, k := range table {
		r.byName[k.Name()] = k
		r.order = append(r.order, k.Name())
	}
	use(r)
	judge.SetCanned(canned)
	spend.SetAsker(asks)
}

// Fixtures are the registered kinds' fixtures of the offline judge at their defaults
// (kind.Fixtured), by request kind, and the request whose fixture names the scripted
// model: what `--judge scripted` answers with when no flag is given, for tests and
// harnesses that run every kind without naming one.
func Fixtures() (settings map[string]string, named string) {
	settings = map[string]string{}
	for _, k := range kind.All() {
		if fk, ok := k.(kind.Fixtured); ok {
			for _, f := range fk.Fixtures() {
				if f.Default != "" {
					settings[f.Request] = f.Default
				}
				if f.Names {
					named = f.Request
				}
			}
		}
	}
	return settings, named
}

// Commands are the registered kinds' own CLI subcommands (stage.Commanding, and
// stage.StateCommanding over env, the CLI's), in reporting order, built afresh:
// cmd/tribunal adds them to its command tree.
func Commands(env stage.CommandEnv) []*cobra.Command {
	var out []*cobra.Command
	for _, k := range All() {
		if c, ok := k.(stage.Commanding); ok {
			out = append(out, c.Commands()...)
		}
		if c, ok := k.(stage.StateCommanding); ok {
			out = append(out, c.StateCommands(env)...)
		}
	}
	return out
}

// asks is a job's ask of its team's allowance, as its kind reads its spec (kind.Spending).
func asks(spec events.JobSpec) spend.Ask {
	if k, err := kind.Lookup(spec.Kind); err == nil {
		if s, ok := k.(kind.Spending); ok {
			return s.Asks(spec)
		}
	}
	return spend.Ask{}
}

// canned is the canned answer of the registered kind that makes req requests
// (kind.Scripted), for the offline judge.
func canned(req, setting string) ([]byte, string, bool, error) {
	for _, k := range kind.All() {
		if sk, ok := k.(kind.Scripted); ok {
			if answer, name, ok, err := sk.ScriptedAnswer(req, setting); ok {
				return answer, name, true, err
			}
		}
	}
	return nil, "", false, nil
}

// use makes r the registry in use and registers its kinds' rules, in reporting order.
func use(r *registry) {
	current.Store(r)
	rules := make([]kind.Kind, 0, len(r.order))
	keys := make([]batch.KindKeys, 0, len(r.order))
	for _, name := range r.order {
		rules = append(rules, rulesOf(r.byName[name]))
		kk := batch.KindKeys{Name: string(name)}
		if k, ok := stagesOf(r.byName[name]).(stage.Keyed); ok {
			kk.Keys = k.BatchKeys()
		}
		keys = append(keys, kk)
	}
	kind.Register(rules...)
	if err := batch.SetKinds(keys); err != nil {
		panic(fmt.Sprintf("kinds: batch keys: %v", err))
	}
}

// change applies edit to a copy of the registry in use and makes the copy the one in use.
func change(edit func(*registry)) {
	changing.Lock()
	defer changing.Unlock()
	prev := current.Load()
	next := &registry{byName: maps.Clone(prev.byName), order: slices.Clone(prev.order)}
	edit(next)
	use(next)
}

// rulesOf is the rules of a registered kind: a swapped kind's own (with the optional
// interfaces they implement), else the kind, whose stages embed its rules.
func rulesOf(k stage.Kind) kind.Kind {
	if s, ok := k.(swapped); ok {
		return s.Kind
	}
	return k
}

// stagesOf is the stages of a registered kind: a swapped kind's previous ones, else the
// kind.
func stagesOf(k stage.Kind) stage.Stages {
	if s, ok := k.(swapped); ok {
		return s.Stages
	}
	return k
}

// Swap puts k's rules in place of those of the kind of the same name, its stages staying,
// and returns the function that puts the previous ones back. It exists for tests that
// change one rule and show that every part of tribunal which decides (the aggregator
// service, the audit, rejudge) follows it, because they all dispatch through this table.
// Tests that swap must not run in parallel.
func Swap(k kind.Kind) (restore func()) {
	var prev stage.Kind
	change(func(r *registry) {
		prev = r.byName[k.Name()]
		r.byName[k.Name()] = swapped{Kind: k, Stages: prev}
	})
	return func() { change(func(r *registry) { r.byName[k.Name()] = prev }) }
}

// swapped is a kind whose rules a test swapped (Swap): the new rules, the old stages.
type swapped struct {
	kind.Kind
	stage.Stages
}

// Add registers k, a kind whole that is not in the table (an example's, a test's), after
// the table's kinds in reporting order, with its own wire schema when it brings one
// (kind.Wired), and returns the function that takes it out again. Kinds that ship are a
// line of the table instead; tests that add kinds of different names may run in
// parallel.
func Add(k stage.Kind) (remove func()) {
	name := k.Name()
	var unwire func()
	if w, ok := k.(kind.Wired); ok {
		unwire = events.RegisterKind(name, w.Wire())
	}
	change(func(r *registry) {
		if _, ok := r.byName[name]; ok {
			panic(fmt.Sprintf("kinds: kind %q is registered already", name))
		}
		r.byName[name] = k
		r.order = append(r.order, name)
	})
	return func() {
		change(func(r *registry) {
			delete(r.byName, name)
			r.order = slices.DeleteFunc(r.order, func(n events.Kind) bool { return n == name })
		})
		if unwire != nil {
			unwire()
		}
	}
}

// Lookup returns the kind named k: its rules and its stages.
func Lookup(k events.Kind) (stage.Kind, error) {
	if impl, ok := current.Load().byName[k]; ok {
		return impl, nil
	}
	return nil, fmt.Errorf("%w: unknown judge kind %q", kind.ErrNotForKind, k)
}

// All returns every kind in reporting order.
func All() []stage.Kind {
	r := current.Load()
	out := make([]stage.Kind, 0, len(r.order))
	for _, k := range r.order {
		out = append(out, r.byName[k])
	}
	return out
}

// Names returns every kind's name, sorted.
func Names() []string {
	var out []string
	for k := range current.Load().byName {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// Looping reports whether jobs of k loop over iterations (kind.Looping).
func Looping(k events.Kind) (kind.Looping, bool) { return kind.LoopingOf(k) }
