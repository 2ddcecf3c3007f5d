//go:build unix

// Package fifotest makes named pipes for tests of code that must never block on one.
package fifotest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Make creates a named pipe (FIFO) at path, and its folder, that nothing writes to. At
// cleanup it opens the pipe for writing once, so a reader still blocked opening it (the
// failure such tests catch) is released rather than leaked.
func Make(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}
