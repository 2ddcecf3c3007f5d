package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quickstartCopy copies the quickstart batch into a temporary folder, with edit applied
// to its batch.yaml.
func quickstartCopy(t *testing.T, edit func(string) string) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "examples", "quickstart")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "batch.yaml" {
			data = []byte(edit(string(data)))
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// criterionTypo misspells AC-2's criterion key (line 14 of the quickstart batch).
func criterionTypo(s string) string {
	return strings.Replace(s, "    criterion: The error message", "    criterian: The error message", 1)
}

// TestEntryTypoSaysWhereAndWhat: a typo inside an AC entry blocks that AC with a reason
// naming the AC, the line, the key and the key it probably meant, not an artifact.
func TestEntryTypoSaysWhereAndWhat(t *testing.T) {
	dir := quickstartCopy(t, criterionTypo)
	stdout, stderr, code := run(t, dir, "run", ".", "--out", t.TempDir(), "-q")
	const want = "AC-2: line 14: unknown key criterian (did you mean criterion?)"
	if code != 1 || !regexp.MustCompile(`(?m)^AC-2\s+ab\s+blocked\s.*\s`+regexp.QuoteMeta(want)+`$`).MatchString(stdout) {
		t.Fatalf("exit %d; want AC-2 blocked with %q\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
	if strings.Contains(stdout, "artifact") && strings.Contains(stdout, "(none)") {
		t.Errorf("the reason still blames an artifact:\n%s", stdout)
	}
}
