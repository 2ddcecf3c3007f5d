package argus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSeedSchemas pins that the seed's schemas (schemas/argus, the text of seed 004's
// spec.schema.json, verdict.schema.json and gate-result.schema.json) are enforced where
// tribunal reads those documents: spec lint, the judge's verdict and a gate result. Each
// row is a document tribunal's own parser would take and the seed's schema refuses, or a
// document both accept.
func TestSeedSchemas(t *testing.T) {
	t.Parallel()
	template, err := os.ReadFile(filepath.Join("testdata", "seed-template", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := LintSpec(template, nil)
	if err != nil || !rep.Valid {
		t.Fatalf("the seed's template must lint clean: %+v %v", rep, err)
	}
	if vs := checkSchema(specSchema, template); len(vs) != 0 {
		t.Fatalf("the seed's template breaks the seed's schema: %+v", vs)
	}
	example, err := os.ReadFile(filepath.Join(exampleDir, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	if vs := checkSchema(specSchema, example); len(vs) != 0 {
		t.Fatalf("examples/rubric-feature breaks the seed's spec schema: %+v", vs)
	}

	// A verdict: the seed's example from argus-judge.md, then edits.
	verdict := func(edit func(m map[string]any)) []byte {
		m := map[string]any{"iteration": 3, "feature": "habits", "target": "list", "state": "populated", "appearance": "dark",
			"reference_source": "human", "closer_to_reference_than_prev": true, "all_pass": true, "failed_dimensions": []any{}, "notes": "n",
			"dimensions": map[string]any{"visual_fidelity": map[string]any{"score": 1, "anchor": "reference", "evidence": "e"}}}
		if edit != nil {
			edit(m)
		}
		b, _ := json.Marshal(m)
		return b
	}
	for _, tc := range []struct {
		name string
		doc  []byte
		ok   bool
	}{
		{"the seed's example", verdict(nil), true},
		{"closer_to_reference_than_prev null", verdict(func(m map[string]any) { m["closer_to_reference_than_prev"] = nil }), true},
		{"iteration 0", verdict(func(m map[string]any) { m["iteration"] = 0 }), false},
		{"reference_source other", verdict(func(m map[string]any) { m["reference_source"] = "agent" }), false},
	} {
		t.Run("verdict "+tc.name, func(t *testing.T) {
			_, err := ParseVerdict(tc.doc)
			if (err == nil) != tc.ok || (len(checkSchema(verdictSchema, tc.doc)) == 0) != tc.ok {
				t.Fatalf("ParseVerdict = %v; schema %+v; want ok=%v", err, checkSchema(verdictSchema, tc.doc), tc.ok)
			}
		})
	}

	// Gate results: every result tribunal assembles holds under the schema, extra gates
	// included (the one documented change to the seed's text).
	v := View{Target: "list", State: "populated", Appearance: "light"}
	for _, ag := range []AdapterGates{{}, {Build: GatePass, Snapshot: GateDiff}, {Extra: []ExtraGate{{Name: "perf", Status: GateFail}}}} {
		out, _ := json.Marshal(AssembleGateResult(v, "habits", ag, GateSkip, nil))
		if vs := checkSchema(gateResultSchema, out); len(vs) != 0 {
			t.Fatalf("%s breaks the gate-result schema: %+v", out, vs)
		}
		if _, err := ParseGateResult(out); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ParseGateResult([]byte(`{"feature":"f","target":"t","gates":{"a11y_ids":{"expected":1,"present":0,"missing":[]}},"all_green":true,"state":7}`)); err == nil {
		t.Fatal("a gate result with a numeric state was accepted")
	}

	// The rubric schema (tribunal's, from the seed's rubric.json) accepts the seed's
	// default rubric and refuses what the loop cannot read.
	if vs := checkSchema(rubricSchema, DefaultRubricJSON()); len(vs) != 0 {
		t.Fatalf("the default rubric breaks the rubric schema: %+v", vs)
	}
	if vs := checkSchema(rubricSchema, []byte(`{"dimensions":{"a":{"anchor":"reference","threshold":2}}}`)); len(vs) == 0 {
		t.Fatal("threshold 2 accepted")
	}
	if vs := checkSchema(specSchema, []byte(`{"feature":"x","adapter":"web","design_system":{"tokens":"t"},"targets":[{"id":"a","route":"r","states":["s"],"viewport":{}}]}`)); len(vs) == 0 || !strings.Contains(vs[0].Path, "targets[0]") {
		t.Fatalf("an unknown target key passes the seed's spec schema: %+v", vs)
	}
}
