package argus

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCandidateChangeOnTheSeedTemplate: HE-1 on the seed's own template sets the canonical
// view's entry (populated/dark, "status": "needed") to candidate, as one JSON Patch
// operation, and the file keeps every other byte; applied again, nothing changes.
func TestCandidateChangeOnTheSeedTemplate(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("testdata", "seed-template", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := CandidateChange(spec, "list")
	if err != nil || !ok || c.Op != "replace" || c.Path != "/targets/0/references/0/status" || c.Value != RefCandidate {
		t.Fatalf("change %+v %v %v", c, ok, err)
	}
	next, applied, err := ApplyCandidateChange(spec, c)
	if err != nil || !applied {
		t.Fatalf("applied %v %v", applied, err)
	}
	want := bytes.Replace(spec, []byte(`"status": "needed"`), []byte(`"status": "candidate"`), 1)
	if !bytes.Equal(next, want) {
		t.Fatalf("the file changed beyond the status:\n%s", next)
	}
	s, err := ParseSpec(next)
	if err != nil || s.Targets[0].CanonicalReference().Status != RefCandidate {
		t.Fatalf("parsed %+v %v", s, err)
	}
	if again, applied, err := ApplyCandidateChange(next, c); err != nil || applied || !bytes.Equal(again, next) {
		t.Fatalf("applied twice: %v %v", applied, err)
	}
	if _, ok, _ := CandidateChange(next, "list"); ok {
		t.Fatal("a candidate needs no change")
	}
}

// TestCandidateChangeAddsAnEntry: a target whose canonical view has no manifest entry gets
// one (the seed's file name, status candidate), into its references or a new list, laid
// out like its neighbours.
func TestCandidateChangeAddsAnEntry(t *testing.T) {
	for name, c := range map[string]struct {
		spec, op, path string
	}{
		"other entries": {`{
  "feature": "f",
  "adapter": "web",
  "design_system": {"tokens": "tokens.json"},
  "targets": [
    {
      "id": "list",
      "route": "page.html",
      "states": ["populated", "empty"],
      "references": [
        {"state": "empty", "appearance": "light", "status": "needed"}
      ]
    }
  ]
}
`, "add", "/targets/0/references/-"},
		"no references": {`{
  "feature": "f",
  "adapter": "web",
  "design_system": {"tokens": "tokens.json"},
  "targets": [
    {
      "id": "list",
      "route": "page.html",
      "states": ["populated"]
    }
  ]
}
`, "add", "/targets/0/references"},
		"empty references": {`{"feature": "f", "adapter": "web", "design_system": {"tokens": "tokens.json"},
 "targets": [{"id": "list", "route": "page.html", "states": ["populated"], "references": []}]}`, "add", "/targets/0/references/-"},
	} {
		t.Run(name, func(t *testing.T) {
			ch, ok, err := CandidateChange([]byte(c.spec), "list")
			if err != nil || !ok || ch.Op != c.op || ch.Path != c.path {
				t.Fatalf("change %+v %v %v", ch, ok, err)
			}
			next, applied, err := ApplyCandidateChange([]byte(c.spec), ch)
			if err != nil || !applied {
				t.Fatalf("applied %v %v", applied, err)
			}
			s, err := ParseSpec(next)
			if err != nil {
				t.Fatalf("%v\n%s", err, next)
			}
			r := s.Targets[0].CanonicalReference()
			if r.Status != RefCandidate || r.File != "references/list-populated-light.png" || !strings.HasPrefix(string(next), c.spec[:20]) {
				t.Fatalf("canonical entry %+v\n%s", r, next)
			}
			var v any
			if json.Unmarshal(next, &v) != nil {
				t.Fatalf("not JSON:\n%s", next)
			}
		})
	}
}

// TestApplyCandidateChangeRefusesAnotherFile: a change planned from one spec.json is not
// applied to a spec.json whose entries moved since: it would edit another entry.
func TestApplyCandidateChangeRefusesAnotherFile(t *testing.T) {
	spec, _ := os.ReadFile(filepath.Join("testdata", "seed-template", "spec.json"))
	planned := SpecChange{Op: "replace", Path: "/targets/0/references/1/status", Value: RefCandidate}
	if _, _, err := ApplyCandidateChange(spec, planned); err == nil || !strings.Contains(err.Error(), "changed since") {
		t.Fatalf("err %v", err)
	}
}
