package kind

import (
	"fmt"
	"sync/atomic"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// The rules' view of the registry. pkg/registry holds every kind whole, its rules with its
// stages, and registers their rules here when the program starts; the rules
// (pkg/rulebook) and the readers look kinds up here, so they reach no kind's stages and
// nothing those stages import.

// registry is the rules of every registered kind, in reporting order.
type registry struct {
	byName map[events.Kind]Kind
	order  []Kind
}

// registered is swapped whole (Register) rather than locked: every input reads it.
var registered atomic.Pointer[registry]

// Register sets the kinds whose rules the rules and the readers know, in the order kinds
// are reported and their manifests announced. pkg/registry calls it (at start, and when a
// test swaps or adds a kind); nothing else should.
func Register(ks ...Kind) {
	r := &registry{byName: make(map[events.Kind]Kind, len(ks)), order: append([]Kind(nil), ks...)}
	for _, k := range ks {
		r.byName[k.Name()] = k
	}
	registered.Store(r)
}

// Lookup returns the rules of the kind named k.
func Lookup(k events.Kind) (Kind, error) {
	if r := registered.Load(); r != nil {
		if impl, ok := r.byName[k]; ok {
			return impl, nil
		}
	}
	return nil, fmt.Errorf("%w: unknown judge kind %q", ErrNotForKind, k)
}

// All returns every registered kind's rules in reporting order.
func All() []Kind {
	r := registered.Load()
	if r == nil {
		return nil
	}
	return append([]Kind(nil), r.order...)
}

// LoopingOf returns the rules of kind k when its jobs loop (Looping).
func LoopingOf(k events.Kind) (Looping, bool) {
	impl, err := Lookup(k)
	if err != nil {
		return nil, false
	}
	l, ok := impl.(Looping)
	return l, ok
}
