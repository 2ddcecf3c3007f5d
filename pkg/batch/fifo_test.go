//go:build unix

package batch

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadRefusesFIFO: a batch file or verify map that is a named pipe is refused with
// its path at once; opening it for reading would block until something wrote to it.
func TestLoadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, DefaultFile)
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	verify := filepath.Join(dir, "verify.json")
	if err := syscall.Mkfifo(verify, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	t.Cleanup(func() { // release a reader blocked in open (the bug) rather than leak it
		for _, p := range []string{pipe, verify} {
			if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
	errs := make(chan error, 2)
	go func() {
		_, err := Load(dir)
		errs <- err
	}()
	go func() {
		_, err := (&Batch{Path: filepath.Join(dir, "b.yaml"), Dir: dir, File: File{Verify: "verify.json"}}).VerifyMap()
		errs <- err
	}()
	for range 2 {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a regular file") || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %v; want the FIFO refused with its path", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("still blocked after 10 s opening a FIFO")
		}
	}
}
