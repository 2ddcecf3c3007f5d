//go:build unix

// Package fifotest makes named pipes for tests of code that must never block on one.
package fifotest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// Refused runs open, which reads a FIFO made with Make in dir, and fails t unless it
// returns at once with an error that says the file is a named pipe and names dir:
// opening the pipe for reading would block until something wrote to it.
func Refused(t testing.TB, dir string, open func() error) {
	t.Helper()
	errs := make(chan error, 1)
	go func() { errs <- open() }()
	select {
	case err := <-errs:
		if err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a regular file") || !strings.Contains(err.Error(), dir) {
			t.Errorf("error %v; want the FIFO refused with its path", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still blocked after 10 s opening a FIFO")
	}
}
