// Package tribunalbin builds the tribunal command for tests that run it as real processes
// (killed, restarted, driven through its CLI), the way users and operators do.
package tribunalbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// Build compiles the package at pkgDir (the cmd/tribunal folder, relative to the calling
// test's folder) into a temporary folder. remove deletes that folder.
func Build(pkgDir string) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "tribunal-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("build tribunal: %w", err)
	}
	path = filepath.Join(dir, "tribunal")
	args := []string{"build", "-o", path}
	if tags := buildTags(); tags != "" {
		args = append(args, "-tags", tags)
	}
	if out, err := exec.Command("go", append(args, pkgDir)...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build tribunal from %s: %v\n%s", pkgDir, err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Main is the TestMain of a package whose tests run the tribunal command: it builds the
// package at pkgDir once, sets *path to the binary, runs the tests and exits with their
// code after removing the build.
func Main(m *testing.M, pkgDir string, path *string) {
	bin, remove, err := Build(pkgDir)
	if err != nil {
		panic(err)
	}
	*path = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// buildTags are the build tags the running test binary was built with, so the command
// it runs is built the same way: `go test -tags chaosbroken` (internal/chaos's
// deliberately broken build) runs a tribunal built with chaosbroken.
func buildTags() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" {
			return s.Value
		}
	}
	return ""
}
