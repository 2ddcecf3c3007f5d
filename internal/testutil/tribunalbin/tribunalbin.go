// Package tribunalbin builds the tribunal command for tests that run it as real processes
// (killed, restarted, driven through its CLI), the way users and operators do.
package tribunalbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if out, err := exec.Command("go", "build", "-o", path, pkgDir).CombinedOutput(); err != nil {
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
