package argus

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// baseSpec is a valid spec; tests mutate a decoded copy.
const baseSpec = `{
  "feature": "habits",
  "adapter": "web",
  "design_system": {"tokens": "tokens.json", "contrast_pairs": "contrast-pairs.json"},
  "targets": [{
    "id": "list",
    "route": "page.html",
    "states": ["populated", "empty"],
    "appearances": ["light", "dark"],
    "fixtures": {"populated": "three-items", "empty": "no-items"},
    "canonical": {"state": "populated", "appearance": "light"},
    "a11y_contract": ["screen.list", "row.item.*"],
    "references": [
      {"state": "populated", "appearance": "light", "status": "present", "source": "human", "file": "references/list-populated-light.png"},
      {"state": "empty", "appearance": "light", "status": "needed"}
    ],
    "component_contracts": [{"state": "populated", "expects": "one row per item"}]
  }]
}`

func mutate(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(baseSpec), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func target0(m map[string]any) map[string]any {
	return m["targets"].([]any)[0].(map[string]any)
}

func ref(m map[string]any, i int) map[string]any {
	return target0(m)["references"].([]any)[i].(map[string]any)
}

func existing(files ...string) func(string) bool {
	return func(f string) bool {
		for _, e := range files {
			if e == f {
				return true
			}
		}
		return false
	}
}

func TestLintSpecErrors(t *testing.T) {
	t.Parallel()
	refs := existing("references/list-populated-light.png")
	cases := []struct {
		name    string
		mut     func(m map[string]any)
		path    string
		message string
	}{
		{"missing feature", func(m map[string]any) { delete(m, "feature") }, "feature", "is required"},
		{"bad slug", func(m map[string]any) { m["feature"] = "My Feature" }, "feature", "not a lowercase slug"},
		{"slug may not start with a dash", func(m map[string]any) { m["feature"] = "-x" }, "feature", "not a lowercase slug"},
		{"feature not a string", func(m map[string]any) { m["feature"] = 7 }, "feature", "must be a string, got a number"},
		{"unknown top-level key", func(m map[string]any) { m["owner"] = "me" }, "owner", "unknown key"},
		{"empty adapter", func(m map[string]any) { m["adapter"] = " " }, "adapter", "must not be empty"},
		{"tokens required", func(m map[string]any) { m["design_system"] = map[string]any{} }, "design_system.tokens", "is required"},
		{"tokens path escapes", func(m map[string]any) { m["design_system"].(map[string]any)["tokens"] = "../other/tokens.json" }, "design_system.tokens", "inside the batch folder, the repository or the feature folder"},
		{"targets not array", func(m map[string]any) { m["targets"] = map[string]any{"id": "list"} }, "targets", "must be an array, got an object"},
		{"targets empty", func(m map[string]any) { m["targets"] = []any{} }, "targets", "at least one target"},
		{"target not an object", func(m map[string]any) { m["targets"] = []any{"list"} }, "targets[0]", "must be an object, got a string"},
		{"states empty", func(m map[string]any) { target0(m)["states"] = []any{} }, "targets[0].states", "must not be empty"},
		{"states missing", func(m map[string]any) { delete(target0(m), "states") }, "targets[0].states", "is required"},
		{"state not a string", func(m map[string]any) { target0(m)["states"] = []any{"populated", 3} }, "targets[0].states[1]", "must be a string"},
		{"state listed twice", func(m map[string]any) { target0(m)["states"] = []any{"populated", "empty", "empty"} }, "targets[0].states[2]", "listed twice"},
		{"target id bad slug", func(m map[string]any) { target0(m)["id"] = "List" }, "targets[0].id", "not a lowercase slug"},
		{"duplicate target id", func(m map[string]any) {
			m["targets"] = append(m["targets"].([]any), map[string]any{"id": "list", "route": "x", "states": []any{"a"}})
		}, "targets[1].id", "already the id of targets[0]"},
		{"empty appearances", func(m map[string]any) { target0(m)["appearances"] = []any{} }, "targets[0].appearances", "must not be empty"},
		{"fixture for an unknown state", func(m map[string]any) { target0(m)["fixtures"].(map[string]any)["loading"] = "slow" }, "targets[0].fixtures.loading", "not one of the target's states"},
		{"canonical names an unknown appearance", func(m map[string]any) {
			target0(m)["canonical"].(map[string]any)["appearance"] = "sepia"
		}, "targets[0].canonical.appearance", "not one of the target's appearances"},
		{"unknown target key", func(m map[string]any) { target0(m)["viewport"] = "1440x900" }, "targets[0].viewport", "unknown key"},
		{"a11y contract entry empty", func(m map[string]any) { target0(m)["a11y_contract"] = []any{"a", ""} }, "targets[0].a11y_contract[1]", "must not be empty"},
		{"reference status bad", func(m map[string]any) { ref(m, 1)["status"] = "missing" }, "targets[0].references[1].status", `"missing" is not one of present, needed, candidate`},
		{"reference status missing", func(m map[string]any) { delete(ref(m, 1), "status") }, "targets[0].references[1].status", "is required"},
		{"reference source bad", func(m map[string]any) { ref(m, 0)["source"] = "designer" }, "targets[0].references[0].source", "not one of human, candidate"},
		{"reference unknown key", func(m map[string]any) { ref(m, 0)["approved_by"] = "x" }, "targets[0].references[0].approved_by", "unknown key"},
		{"present reference without file", func(m map[string]any) { delete(ref(m, 0), "file") }, "targets[0].references[0].file", "required when status is present"},
		{"present reference whose file is missing", func(m map[string]any) {
			ref(m, 0)["file"] = "references/gone.png"
		}, "targets[0].references[0].file", "status is present but references/gone.png does not exist"},
		{"reference file outside the folder", func(m map[string]any) { ref(m, 0)["file"] = "/etc/passwd" }, "targets[0].references[0].file", "inside the feature folder"},
		{"reference for an unknown state", func(m map[string]any) { ref(m, 1)["state"] = "loading" }, "targets[0].references[1].state", "not one of the target's states"},
		{"two entries for one view", func(m map[string]any) { ref(m, 1)["state"] = "populated" }, "targets[0].references[1]", "second entry for populated/light"},
		{"component contract not an object", func(m map[string]any) { target0(m)["component_contracts"] = []any{"rows"} }, "targets[0].component_contracts[0]", "must be an object"},
		{"root not an object", func(m map[string]any) {}, "(root)", "must be an object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := mutate(t, c.mut)
			if c.path == "(root)" {
				data = []byte(`["not a spec"]`)
			}
			rep, err := LintSpec(data, refs)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Valid {
				t.Fatalf("valid; want %s: %s", c.path, c.message)
			}
			for _, e := range rep.Errors {
				if e.Path == c.path && strings.Contains(e.Message, c.message) {
					return
				}
			}
			t.Fatalf("errors %v lack %s: %s", rep.Errors, c.path, c.message)
		})
	}
}

func TestLintSpecWorklist(t *testing.T) {
	t.Parallel()
	rep, err := LintSpec([]byte(baseSpec), existing("references/list-populated-light.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid || len(rep.Errors) != 0 {
		t.Fatalf("errors %v", rep.Errors)
	}
	// The needed non-canonical reference is work for a human, not an error.
	if len(rep.ReferenceWorklist) != 1 || rep.ReferenceWorklist[0] != (WorklistItem{Target: "list", State: "empty", Appearance: "light", Status: RefNeeded}) {
		t.Fatalf("worklist %+v", rep.ReferenceWorklist)
	}
	if rep.NeedsContext() {
		t.Error("the canonical reference is present")
	}

	// Canonical reference as a candidate: still valid, and now the target needs context.
	data := mutate(t, func(m map[string]any) {
		ref(m, 0)["status"] = "candidate"
		ref(m, 0)["file"] = "candidates/list-populated-light.png"
	})
	rep, _ = LintSpec(data, existing())
	if !rep.Valid || len(rep.ReferenceWorklist) != 2 || !rep.ReferenceWorklist[0].Canonical || rep.ReferenceWorklist[0].Status != RefCandidate || !rep.NeedsContext() {
		t.Fatalf("%+v", rep)
	}

	// No references at all: the canonical view is listed as needed, with the usual name.
	data = mutate(t, func(m map[string]any) { delete(target0(m), "references"); delete(target0(m), "canonical") })
	rep, _ = LintSpec(data, existing())
	want := WorklistItem{Target: "list", State: "populated", Appearance: "light", Status: RefNeeded,
		File: "references/list-populated-light.png", Canonical: true, Undeclared: true}
	if !rep.Valid || len(rep.ReferenceWorklist) != 1 || rep.ReferenceWorklist[0] != want {
		t.Fatalf("%+v", rep)
	}

	// Without a file checker, present references are not looked up.
	if rep, _ := LintSpec([]byte(baseSpec), nil); !rep.Valid {
		t.Fatalf("%v", rep.Errors)
	}
}

func TestLintSpecUnreadable(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `{`, `{"feature":"a"} {}`, `nope`} {
		if _, err := LintSpec([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// A duplicate key is a structural problem with a path, not unreadable input.
	rep, err := LintSpec([]byte(`{"feature":"a","feature":"b"}`), nil)
	if err != nil || rep.Valid || rep.Errors[0].Path != "feature" {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestLintSpecFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte(baseSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := LintSpecFile(filepath.Join(dir, "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Valid || rep.Errors[0].Path != "targets[0].references[0].file" {
		t.Fatalf("missing reference file not reported: %+v", rep)
	}
	os.MkdirAll(filepath.Join(dir, "references"), 0o755)
	os.WriteFile(filepath.Join(dir, "references", "list-populated-light.png"), []byte("png"), 0o644)
	if rep, err := LintSpecFile(filepath.Join(dir, "spec.json")); err != nil || !rep.Valid {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := LintSpecFile(filepath.Join(dir, "absent.json")); err == nil {
		t.Fatal("unreadable spec without error")
	}
}

func TestSpecViews(t *testing.T) {
	t.Parallel()
	s, err := ParseSpec([]byte(baseSpec))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range s.Views() {
		k := v.Key() + "@" + v.Fixture
		if v.Canonical {
			k += "*"
		}
		got = append(got, k)
	}
	want := "list/populated/light@three-items*,list/populated/dark@three-items,list/empty/light@no-items,list/empty/dark@no-items"
	if strings.Join(got, ",") != want {
		t.Fatalf("views %v", got)
	}

	// Defaults: appearances ["light"], canonical states[0]+appearances[0], fixture = state.
	s, err = ParseSpec(mutate(t, func(m map[string]any) {
		tg := target0(m)
		delete(tg, "appearances")
		delete(tg, "canonical")
		delete(tg, "fixtures")
		delete(tg, "references")
	}))
	if err != nil {
		t.Fatal(err)
	}
	vs := s.Views()
	if len(vs) != 2 || vs[0] != (View{Target: "list", State: "populated", Appearance: "light", Fixture: "populated", Canonical: true}) || vs[1].Canonical {
		t.Fatalf("%+v", vs)
	}
	tg, _ := s.TargetByID("list")
	if r := tg.CanonicalReference(); r.Status != RefNeeded {
		t.Errorf("undeclared canonical reference: %+v", r)
	}
	if (Reference{}).EffectiveSource() != SourceHuman {
		t.Error("unmarked reference source")
	}

	var se *SpecError
	if _, err := ParseSpec([]byte(`{"feature":"X"}`)); err == nil || !errors.As(err, &se) || len(se.Errors) < 2 {
		t.Fatalf("%v", err)
	}
}
