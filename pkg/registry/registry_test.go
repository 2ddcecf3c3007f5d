package registry

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

func TestRegistryCoversTheWireSchema(t *testing.T) {
	t.Parallel()
	r := current.Load()
	for k, impl := range r.byName {
		if impl.Name() != k {
			t.Errorf("registry line %q holds kind %q", k, impl.Name())
		}
		if !events.KnownKind(k) {
			t.Errorf("kind %q is registered but the wire schema has no line for it", k)
		}
	}
	if len(r.order) != len(r.byName) || len(table) != len(r.byName) {
		t.Errorf("order lists %d kinds, the registry %d, the table %d", len(r.order), len(r.byName), len(table))
	}
	for _, k := range r.order {
		if _, err := Lookup(k); err != nil {
			t.Error(err)
		}
		if _, err := kind.Lookup(k); err != nil {
			t.Errorf("the rules do not find %s: %v", k, err)
		}
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("Lookup of an unknown kind succeeded")
	}
	if _, ok := Looping(events.KindRubric); !ok {
		t.Error("rubric is not looping")
	}
	if _, ok := Looping(events.KindAB); ok {
		t.Error("ab is looping")
	}
}
