package kinds

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

func TestRegistryCoversTheWireSchema(t *testing.T) {
	t.Parallel()
	for k, impl := range registry() {
		if impl.Name() != k {
			t.Errorf("registry line %q holds kind %q", k, impl.Name())
		}
		if !events.KnownKind(k) {
			t.Errorf("kind %q is registered but the wire schema has no line for it", k)
		}
	}
	if len(order) != len(registry()) {
		t.Errorf("order lists %d kinds, the registry %d", len(order), len(registry()))
	}
	for _, k := range order {
		if _, err := Lookup(k); err != nil {
			t.Error(err)
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
