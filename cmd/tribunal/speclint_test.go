package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

const specLintValid = `{
  "feature": "habits", "adapter": "web",
  "design_system": {"tokens": "tokens.json"},
  "targets": [{
    "id": "list", "route": "page.html", "states": ["populated", "empty"],
    "references": [
      {"state": "populated", "appearance": "light", "status": "present", "file": "references/list-populated-light.png"},
      {"state": "empty", "appearance": "light", "status": "needed", "file": "references/list-empty-light.png"}
    ]
  }]
}`

type specLintJSON struct {
	Valid  bool
	Errors []struct {
		Path, Message string
	}
	ReferenceWorklist []struct {
		Target, State, Appearance, Status, File string
		Canonical                               bool
	} `json:"reference_worklist"`
}

func TestSpecLintCmd(t *testing.T) {
	dir := t.TempDir()
	valid := writeArgusFile(t, dir, "ok/spec.json", specLintValid)
	writeArgusFile(t, dir, "ok/references/list-populated-light.png", "png")
	missingRef := writeArgusFile(t, dir, "noref/spec.json", specLintValid)
	badStatus := writeArgusFile(t, dir, "bad/spec.json", strings.Replace(specLintValid, `"status": "needed"`, `"status": "wanted"`, 1))
	notArray := writeArgusFile(t, dir, "arr/spec.json", `{"feature":"x","adapter":"web","design_system":{"tokens":"t"},"targets":{}}`)
	notJSON := writeArgusFile(t, dir, "json/spec.json", `{"feature":`)

	runCmdCases(t, newSpecCmd, []cmdCase{
		{"valid with a worklist", []string{"lint", valid}, 0, []string{"reference  list/empty/light  needed: references/list-empty-light.png", "valid (0 error(s), 1 reference(s) waiting for a human)"}},
		{"present reference whose file is missing", []string{"lint", missingRef}, 1,
			[]string{"error      targets[0].references[0].file  status is present but references/list-populated-light.png does not exist", "INVALID"}},
		{"bad status", []string{"lint", badStatus}, 1, []string{"targets[0].references[1].status", `"wanted" is not one of present, needed, candidate`}},
		{"targets not an array", []string{"lint", notArray}, 1, []string{"targets  must be an array, got an object"}},
		{"not JSON", []string{"lint", notJSON}, 2, nil},
		{"unreadable", []string{"lint", filepath.Join(dir, "absent.json")}, 2, nil},
		{"no argument", []string{"lint"}, 2, nil},
	})
}

func TestSpecLintCmdJSON(t *testing.T) {
	dir := t.TempDir()
	spec := writeArgusFile(t, dir, "spec.json", strings.Replace(specLintValid, `"feature": "habits"`, `"feature": "Habits"`, 1))
	out, _, code := execArgusCmd(t, newSpecCmd(), "lint", spec, "--json")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var rep specLintJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	paths := []string{}
	for _, e := range rep.Errors {
		paths = append(paths, e.Path)
	}
	// The slug and the missing present file; the needed reference is work, not an error.
	if rep.Valid || strings.Join(paths, ",") != "feature,targets[0].references[0].file" {
		t.Fatalf("errors %+v", rep.Errors)
	}
	if len(rep.ReferenceWorklist) != 1 || rep.ReferenceWorklist[0].Status != "needed" || rep.ReferenceWorklist[0].Canonical {
		t.Fatalf("worklist %+v", rep.ReferenceWorklist)
	}
}

// TestSpecLintCmdExample: the example feature lints clean.
func TestSpecLintCmdExample(t *testing.T) {
	out, errOut, code := execArgusCmd(t, newSpecCmd(), "lint", filepath.Join("..", "..", "examples", "rubric-feature", "spec.json"))
	if code != 0 || !strings.Contains(out, "valid (0 error(s), 0 reference(s) waiting for a human)") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
