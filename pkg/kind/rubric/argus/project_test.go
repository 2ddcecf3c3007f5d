package argus

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFindProject pins where a feature's adapters are looked for (seed 004's layout:
// argus/specs/{feature}/ and argus/adapters/{adapter}/{sense,gates}.sh, run from the
// folder holding argus/): the nearest folder holding argus/, no higher than the
// repository root; sense.sh never for web, whose sensor is built in.
func TestFindProject(t *testing.T) {
	t.Parallel()
	root, feature := seedRepo(t)
	touch := func(rel string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	touch("argus/adapters/web/gates.sh")
	touch("argus/adapters/web/sense.sh")
	touch("argus/adapters/app/sense.sh")
	if err := os.MkdirAll(filepath.Join(root, "argus", "adapters", "kiosk", "gates.sh"), 0o755); err != nil {
		t.Fatal(err) // a folder named gates.sh is not a script
	}
	for _, tc := range []struct {
		adapter      string
		sense, gates string
	}{
		{"web", "", "argus/adapters/web/gates.sh"},
		{"app", "argus/adapters/app/sense.sh", ""},
		{"kiosk", "", ""},
		{"ios", "", ""},
	} {
		p, err := FindProject(feature, tc.adapter)
		if err != nil {
			t.Fatal(err)
		}
		want := Project{Root: root, Argus: true, Spec: "argus/specs/example/spec.json", Sense: tc.sense, Gates: tc.gates}
		if p != want {
			t.Errorf("%s: %+v, want %+v", tc.adapter, p, want)
		}
	}
	for _, bad := range []string{"../web", "a/b", "..", ".hidden", ""} {
		if _, err := FindProject(feature, bad); err == nil {
			t.Errorf("adapter %q accepted", bad)
		}
	}
}

// TestProjectRootBounds: the search stops at the repository root, so an argus/ folder
// above the repository never supplies a command; outside any project the root is the
// repository root, else the feature folder, and no script is shipped.
func TestProjectRootBounds(t *testing.T) {
	t.Parallel()
	outer := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outer, "argus", "adapters", "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outer, "argus", "adapters", "web", "gates.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(outer, "repo")
	feature := filepath.Join(repo, "examples", "tasks")
	if err := os.MkdirAll(feature, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := FindProject(feature, "web")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Project{Root: repo, Spec: "examples/tasks/spec.json"}); p != want {
		t.Fatalf("inside a repository without argus/: %+v, want %+v", p, want)
	}
	// Without the repository the outer argus/ is the project's.
	if err := os.Remove(filepath.Join(repo, ".git")); err != nil {
		t.Fatal(err)
	}
	if p, _ := FindProject(feature, "web"); p.Root != outer || p.Gates != "argus/adapters/web/gates.sh" || p.Spec != "repo/examples/tasks/spec.json" {
		t.Fatalf("no repository: %+v", p)
	}
	lone := t.TempDir()
	if p, _ := FindProject(lone, "web"); p.Root != lone || p.Argus || p.Spec != "spec.json" {
		t.Fatalf("a lone folder: %+v", p)
	}
}
