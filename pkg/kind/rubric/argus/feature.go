package argus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/localfile"
)

// Files of a feature folder.
const (
	SpecFile          = "spec.json"
	SpecTextFile      = "spec.md"
	RubricFile        = "rubric.json"
	DefaultTokensFile = "tokens.json"
)

// Feature is a loaded feature folder: the spec and everything it points at.
type Feature struct {
	// Dir is the feature folder; reference files and routes resolve against it.
	Dir string
	// Roots are the folders the design-system paths (tokens, contrast pairs) are tried
	// against first, in order, before Dir (see DesignPath).
	Roots []string
	// TokensPath and PairsPath are where design_system.tokens and contrast_pairs were
	// found (PairsPath "" when the spec declares none).
	TokensPath, PairsPath string
	// Spec is the decoded spec.json.
	Spec *Spec
	// SpecText is spec.md, the prose the judge reads as its spec-text anchor.
	SpecText string
	// Tokens is the design-system mirror named by design_system.tokens.
	Tokens *Tokens
	// Pairs is nil when the spec declares no contrast_pairs (token_contrast: skip).
	Pairs []ContrastPair
	// Rubric is the feature's rubric.json if it has one, else the built-in rubric.
	Rubric *Rubric
	// RubricLocal records that the rubric came from the feature folder.
	RubricLocal bool
	// Lint is the spec lint report (valid, with the reference worklist).
	Lint *LintReport
}

// Path resolves a path from the spec inside the feature folder, refusing absolute
// paths and paths that leave the folder.
func (f *Feature) Path(rel string) (string, error) {
	return featurePath(f.Dir, rel)
}

// DesignPath resolves a design-system path from the spec (design_system.tokens or
// contrast_pairs) the way the seed's gates.sh does: "a repo-relative path: try as-given
// (cwd), then relative to the spec's dir". The seed runs from the repository root, so its
// template names tokens as argus/specs/example/tokens.json. tribunal has no such working
// directory; it tries each of Roots (the batch folder, the repository root) and then the
// feature folder, and takes the first existing file. The path must be relative and is
// never resolved outside the folder it is tried against.
func (f *Feature) DesignPath(rel string) (string, error) {
	p := filepath.FromSlash(rel)
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%q is not a relative path inside the batch folder, the repository or the feature folder", rel)
	}
	tried := []string{}
	for _, base := range append(append([]string{}, f.Roots...), f.Dir) {
		if base == "" {
			continue
		}
		c := filepath.Join(base, p)
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c, nil
		}
		tried = append(tried, c)
	}
	return "", fmt.Errorf("%q not found (tried %s)", rel, strings.Join(tried, ", "))
}

// RepoRoot returns the repository root above dir: the nearest folder, dir included,
// that holds a .git entry; "" when there is none.
func RepoRoot(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(abs, ".git")); err == nil {
			return abs
		}
		up := filepath.Dir(abs)
		if up == abs {
			return ""
		}
		abs = up
	}
}

func featurePath(dir, rel string) (string, error) {
	p := filepath.FromSlash(rel)
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%q is not a relative path inside the feature folder", rel)
	}
	return filepath.Join(dir, p), nil
}

// LintSpecFile lints a spec.json on disk, checking present references against the
// files next to it. The error is for a spec that cannot be read or is not JSON (exit
// 2 in the CLI); structural problems are in the report.
func LintSpecFile(path string) (*LintReport, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	dir := filepath.Dir(path)
	rep, err := LintSpec(data, func(file string) bool {
		p, err := featurePath(dir, file)
		if err != nil {
			return false
		}
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}

// LoadRubric returns the feature folder's rubric.json when there is one (local=true),
// else the built-in rubric. A local rubric replaces the built-in one entirely, so a
// team that drops a dimension has dropped it on purpose.
func LoadRubric(dir string) (r *Rubric, local bool, err error) {
	data, err := readFile(filepath.Join(dir, RubricFile))
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultRubric(), false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read rubric: %w", err)
	}
	r, err = ParseRubric(data)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", filepath.Join(dir, RubricFile), err)
	}
	return r, true, nil
}

// LoadFeature reads a feature folder: spec.json (which must lint clean, present
// references included), spec.md, the tokens, the contrast pairs if declared, and the
// rubric. roots are the folders design-system paths are resolved against before the
// feature folder (Feature.DesignPath): the batch folder and the repository root. An
// invalid spec comes back as a *SpecError, so the caller can report the feature BLOCKED
// with the lint errors.
func LoadFeature(dir string, roots ...string) (*Feature, error) {
	rep, err := LintSpecFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return nil, err
	}
	if !rep.Valid {
		return nil, &SpecError{Errors: rep.Errors}
	}
	data, err := readFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	spec, err := ParseSpec(data)
	if err != nil {
		return nil, err
	}
	f := &Feature{Dir: dir, Roots: roots, Spec: spec, Lint: rep}
	text, err := readFile(filepath.Join(dir, SpecTextFile))
	if err != nil {
		return nil, fmt.Errorf("read spec text: %w", err)
	}
	f.SpecText = string(text)

	tp, err := f.DesignPath(spec.DesignSystem.Tokens)
	if err != nil {
		return nil, fmt.Errorf("design_system.tokens: %w", err)
	}
	f.TokensPath = tp
	data, err = readFile(tp)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	if f.Tokens, err = ParseTokens(data); err != nil {
		return nil, fmt.Errorf("%s: %w", tp, err)
	}
	if spec.DesignSystem.ContrastPairs != "" {
		pp, err := f.DesignPath(spec.DesignSystem.ContrastPairs)
		if err != nil {
			return nil, fmt.Errorf("design_system.contrast_pairs: %w", err)
		}
		f.PairsPath = pp
		data, err = readFile(pp)
		if err != nil {
			return nil, fmt.Errorf("read contrast pairs: %w", err)
		}
		if f.Pairs, err = ParseContrastPairs(data); err != nil {
			return nil, fmt.Errorf("%s: %w", pp, err)
		}
	}
	if f.Rubric, f.RubricLocal, err = LoadRubric(dir); err != nil {
		return nil, err
	}
	return f, nil
}

// TokenContrast runs the token_contrast gate for the feature in the given appearances
// (empty: those the tokens define). Without declared pairs the gate is skipped rather
// than passed, so a feature without pairs is not mistaken for one that was checked.
func (f *Feature) TokenContrast(appearances []string) (GateStatus, *ContrastReport, error) {
	if f.Pairs == nil {
		return GateSkip, nil, nil
	}
	rep, err := CheckContrast(f.Tokens, f.Pairs, appearances)
	if err != nil {
		return "", nil, fmt.Errorf("token_contrast: %w", err)
	}
	return rep.GateStatus(), rep, nil
}

// readFile reads a file of a feature folder: a regular file only, so a FIFO or a device
// put in the folder is refused with its path instead of blocking the caller forever.
// Feature files are small, so there is no reading to cancel once the file is open.
func readFile(path string) ([]byte, error) {
	return localfile.ReadFile(context.Background(), path)
}
