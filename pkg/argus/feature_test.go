package argus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const exampleDir = "../../examples/rubric-feature"

// TestExampleFeature loads the repository's example feature the way the renderer and
// gater will, and runs its platform-agnostic gates.
func TestExampleFeature(t *testing.T) {
	f, err := LoadFeature(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Lint.Valid || f.Lint.NeedsContext() || f.RubricLocal || len(f.Rubric.Dimensions) != 7 || f.SpecText == "" {
		t.Fatalf("%+v", f.Lint)
	}
	views := f.Spec.Views()
	if len(views) != 1 || !views[0].Canonical || views[0].Key() != "list/populated/light" {
		t.Fatalf("views %+v", views)
	}
	status, rep, err := f.TokenContrast(nil)
	if err != nil || status != GatePass {
		t.Fatalf("contrast %s %+v %v", status, rep, err)
	}
	tg, _ := f.Spec.TargetByID("list")
	ref := tg.CanonicalReference()
	if ref.Status != RefPresent {
		t.Fatalf("%+v", ref)
	}
	p, err := f.Path(ref.File)
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if c := CompareImages(png, png); !c.Unchanged || c.Method != MethodPixel {
		t.Fatalf("reference image does not decode: %+v", c)
	}
	// The page exposes every id of the contract.
	page, err := os.ReadFile(filepath.Join(exampleDir, "page.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tg.A11yContract {
		if !strings.Contains(string(page), strings.TrimSuffix(id, "*")) {
			t.Errorf("page.html does not mention %s", id)
		}
	}
}

func TestLoadFeatureErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadFeature(dir); err == nil {
		t.Fatal("empty folder loaded")
	}
	write("spec.json", `{"feature":"Bad"}`)
	var se *SpecError
	if _, err := LoadFeature(dir); !errors.As(err, &se) {
		t.Fatalf("%v", err)
	}
	write("spec.json", `{"feature":"ok","adapter":"web","design_system":{"tokens":"tokens.json"},"targets":[{"id":"a","route":"r","states":["s"]}]}`)
	if _, err := LoadFeature(dir); err == nil || !strings.Contains(err.Error(), "spec text") {
		t.Fatalf("missing spec.md: %v", err)
	}
	write("spec.md", "# ok\n")
	write("tokens.json", `{"colors":{"a":"#000","b":"#fff"}}`)
	f, err := LoadFeature(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, _, err := f.TokenContrast(nil); s != GateSkip || err != nil {
		t.Errorf("no pairs: %s %v", s, err)
	}
	write("rubric.json", `{"dimensions":{"fit":{"anchor":"reference","threshold":0.5}}}`)
	if f, err = LoadFeature(dir); err != nil || !f.RubricLocal || f.Rubric.Threshold("fit") != 0.5 {
		t.Fatalf("local rubric: %v", err)
	}
	write("rubric.json", `{"dimensions":{}}`)
	if _, err = LoadFeature(dir); err == nil || !strings.Contains(err.Error(), "rubric.json") {
		t.Fatalf("bad rubric: %v", err)
	}
	if _, err := f.Path("../x"); err == nil {
		t.Error("escaping path resolved")
	}
}
