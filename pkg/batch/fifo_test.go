//go:build unix

package batch

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
)

// TestLoadRefusesFIFO: a batch file or verify map that is a named pipe is refused with
// its path at once; opening it for reading would block until something wrote to it.
func TestLoadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	pipe, verify := filepath.Join(dir, DefaultFile), filepath.Join(dir, "verify.json")
	fifotest.Make(t, pipe)
	fifotest.Make(t, verify)
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
