package argus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const exampleDir = "../../../../examples/rubric-feature"

// TestExampleFeature loads the repository's example feature the way the renderer and
// gater will, and runs its platform-agnostic gates.
func TestExampleFeature(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// seedRepo lays the seed's own template out as the seed's README says a project does
// ("mkdir -p argus/specs/myfeature && cp .../_template/* argus/specs/myfeature/") in a
// repository, and returns the repository root and the feature folder.
func seedRepo(t *testing.T) (root, feature string) {
	t.Helper()
	root = t.TempDir()
	feature = filepath.Join(root, "argus", "specs", "example")
	if err := os.MkdirAll(feature, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"spec.json", "tokens.json", "contrast-pairs.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "seed-template", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(feature, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(feature, SpecTextFile), []byte("# example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, feature
}

// TestSeedTemplateLoads pins the seed's gates.sh rule for design-system paths: "Resolve a
// repo-relative path: try as-given (cwd), then relative to the spec's dir", where the
// template names its tokens "argus/specs/example/tokens.json". The roots tribunal tries
// are the batch folder and the repository root, then the feature folder; never a folder
// above them.
func TestSeedTemplateLoads(t *testing.T) {
	t.Parallel()
	root, feature := seedRepo(t)
	if got := RepoRoot(feature); got != root {
		t.Fatalf("RepoRoot = %q, want %q", got, root)
	}
	tests := []struct {
		name    string
		roots   []string
		tokens  string // rewrite design_system.tokens ("" keeps the template's)
		want    string // where the tokens are found, relative to root; "" wants an error
		wantErr string
	}{
		{name: "repository root", roots: []string{RepoRoot(feature)}, want: "argus/specs/example/tokens.json"},
		{name: "batch folder at the repository root", roots: []string{root}, want: "argus/specs/example/tokens.json"},
		{name: "batch folder elsewhere, repository root second", roots: []string{feature, root}, want: "argus/specs/example/tokens.json"},
		{name: "no root: the template's path is not under the feature folder", roots: nil, wantErr: "not found"},
		{name: "a path relative to the feature folder still works", roots: []string{root}, tokens: "tokens.json", want: "argus/specs/example/tokens.json"},
		{name: "never above the roots", roots: []string{feature}, tokens: "../../../argus/specs/example/tokens.json", wantErr: "inside the batch folder, the repository or the feature folder"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tokens != "" {
				spec := filepath.Join(feature, SpecFile)
				data, _ := os.ReadFile(spec)
				edited := strings.Replace(string(data), `"tokens": "argus/specs/example/tokens.json"`, `"tokens": "`+tc.tokens+`"`, 1)
				if err := os.WriteFile(spec, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
				defer os.WriteFile(spec, data, 0o644)
			}
			f, err := LoadFeature(feature, tc.roots...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadFeature = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.TokensPath != filepath.Join(root, filepath.FromSlash(tc.want)) || f.PairsPath == "" || len(f.Pairs) != 5 {
				t.Fatalf("tokens %s pairs %s (%d)", f.TokensPath, f.PairsPath, len(f.Pairs))
			}
			if !f.Lint.Valid || !f.Lint.NeedsContext() {
				t.Fatalf("the template lints clean with its reference still needed: %+v", f.Lint)
			}
		})
	}
}

// TestExampleAppFeature: examples/rubric-app, the command-adapter example, loads and keeps
// its app:// route as written.
func TestExampleAppFeature(t *testing.T) {
	t.Parallel()
	f, err := LoadFeature("../../../../examples/rubric-app")
	if err != nil {
		t.Fatal(err)
	}
	tg, ok := f.Spec.TargetByID("list")
	if !ok || f.Spec.Adapter == AdapterWeb || tg.Route != "app://tasks/list" || f.Lint.NeedsContext() {
		t.Fatalf("%+v %+v", f.Spec, f.Lint)
	}
}
