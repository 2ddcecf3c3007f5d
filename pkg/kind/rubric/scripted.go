package rubric

import (
	"encoding/json"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// ScriptedAnswer implements kind.Scripted: setting "pass" answers every rubric call
// without a recorded answer with a verdict that scores every dimension of the built-in
// rubric 1.
func (Kind) ScriptedAnswer(req, setting string) ([]byte, string, bool, error) {
	if req != string(events.KindRubric) {
		return nil, "", false, nil
	}
	if setting != "pass" {
		return nil, "", true, fmt.Errorf("rubric fixture %q: want pass", setting)
	}
	r := argus.DefaultRubric()
	dims := map[string]any{}
	for _, d := range r.DimensionNames() {
		dims[d] = map[string]any{"score": 1, "anchor": r.Dimensions[d].Anchor, "evidence": kind.ScriptedNote}
	}
	data, _ := json.Marshal(map[string]any{"iteration": 1, "feature": "fixture", "target": "fixture",
		"dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": true, "failed_dimensions": []string{}, "notes": kind.ScriptedNote})
	if _, err := argus.ParseVerdict(data); err != nil {
		return nil, "", true, err
	}
	return data, "fixed-rubric-pass", true, nil
}

var _ kind.Fixtured = Kind{}

// Fixtures implements kind.Fixtured: every rubric call without a recorded answer passes,
// always on.
func (Kind) Fixtures() []kind.Fixture {
	return []kind.Fixture{{Request: string(events.KindRubric), Default: "pass"}}
}
