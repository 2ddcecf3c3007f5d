package rulebook_test

// The rules find kinds through pkg/kind's registry, which the registry of kinds whole
// (pkg/registry) fills when it starts: the tests link it in, as every program does.
import (
	"encoding/json"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	_ "github.com/tribunal-dev/tribunal/pkg/registry"
)

// viewState is a rubric view's own state for the rules: its record (a zero one for nil)
// and its rubric.
func viewState(r *views.Record, rb *argus.Rubric) kind.State {
	s := &rubric.ViewState{Rubric: rb}
	if r != nil {
		s.Record = r.Clone()
	}
	return s
}

// recordOf is the view record of a state the rules returned, nil for none.
func recordOf(s kind.State) *views.Record {
	if vs, ok := s.(*rubric.ViewState); ok {
		return &vs.Record
	}
	return nil
}

// storedView decodes a view's record as the state bucket holds it.
func storedView(t *testing.T, data []byte) views.Record {
	t.Helper()
	var v views.Record
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("stored view %q: %v", data, err)
	}
	return v
}
