package argus

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// ArgusDir is the folder seed 004 puts in a project: argus/specs/{feature}/ and
// argus/adapters/{adapter}/.
const ArgusDir = "argus"

// The scripts a project's adapter folder may hold (seed 004's layout):
// argus/adapters/{adapter}/sense.sh, the sensor, required for every adapter but web, and
// argus/adapters/{adapter}/gates.sh, the platform gates, optional for every adapter.
const (
	SenseScript = "sense.sh"
	GatesScript = "gates.sh"
)

// adapterName is what an adapter name must look like to name a folder under
// argus/adapters/: one path element, so a spec's adapter can never point elsewhere.
var adapterName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckAdapterName refuses an adapter name that is not one plain folder name.
func CheckAdapterName(name string) error {
	if !adapterName.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("adapter %q: want letters, digits, '_', '.' or '-' (at most 64), a folder name under %s/adapters/", name, ArgusDir)
	}
	return nil
}

// AdapterScript is the path of an adapter's script relative to the project root, the way
// the seed's loop names it: argus/adapters/{adapter}/{script}, slash-separated.
func AdapterScript(adapter, script string) string {
	return ArgusDir + "/adapters/" + adapter + "/" + script
}

// Project is a feature's project as seed 004 lays it out. The seed's loop runs from the
// project root, the folder holding argus/: it finds a feature's spec at
// argus/specs/{feature}/spec.json and its adapter's scripts at argus/adapters/{adapter}/.
type Project struct {
	// Root is the project root, absolute. With no argus/ folder found it is the
	// repository root, else the feature folder: where a gates command runs.
	Root string
	// Argus says Root holds an argus/ folder; adapter scripts are looked for only then.
	Argus bool
	// Spec is the spec.json's path relative to Root, slash-separated (the seed's SPEC).
	Spec string
	// Sense and Gates are the adapter's scripts the project ships, relative to Root
	// (AdapterScript), "" when it ships none. Sense is never looked for the web adapter,
	// whose sensor is built in.
	Sense, Gates string
}

// ProjectRoot is the project root of the feature folder dir: the nearest folder, dir
// included, that holds an argus/ folder (argus true), looked for no higher than the
// repository root (the nearest folder holding .git), so that a folder outside the
// feature's repository never supplies a command; without one it is the repository root,
// else dir (argus false). The result is absolute.
func ProjectRoot(dir string) (root string, argus bool, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("project root of %s: %w", dir, err)
	}
	repo := RepoRoot(abs)
	for d := abs; ; {
		if st, err := os.Stat(filepath.Join(d, ArgusDir)); err == nil && st.IsDir() {
			return d, true, nil
		}
		up := filepath.Dir(d)
		if d == repo || up == d {
			break
		}
		d = up
	}
	if repo != "" {
		return repo, false, nil
	}
	return abs, false, nil
}

// FindProject finds the project of the feature whose spec.json is in featureDir
// (ProjectRoot) and the scripts it ships for adapter. Only a project root holding argus/
// ships scripts. A script is shipped when it is a regular file (a symbolic link to one
// included). An adapter name that is not one plain folder name is an error there, since
// it would name a path outside argus/adapters/.
func FindProject(featureDir, adapter string) (Project, error) {
	root, hasArgus, err := ProjectRoot(featureDir)
	if err != nil {
		return Project{}, err
	}
	dir, _ := filepath.Abs(featureDir)
	p := Project{Root: root, Argus: hasArgus}
	rel, err := filepath.Rel(p.Root, filepath.Join(dir, SpecFile))
	if err != nil {
		return Project{}, fmt.Errorf("project of %s: %w", featureDir, err)
	}
	p.Spec = filepath.ToSlash(rel)
	if !p.Argus {
		return p, nil
	}
	if err := CheckAdapterName(adapter); err != nil {
		return Project{}, err
	}
	shipped := func(script string) string {
		rel := AdapterScript(adapter, script)
		if st, err := os.Stat(filepath.Join(p.Root, filepath.FromSlash(rel))); err == nil && st.Mode().IsRegular() {
			return rel
		}
		return ""
	}
	if adapter != AdapterWeb {
		p.Sense = shipped(SenseScript)
	}
	p.Gates = shipped(GatesScript)
	return p, nil
}
