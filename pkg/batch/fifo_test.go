//go:build unix

package batch

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
)

// TestLoadRefusesFIFO: a batch file that is a named pipe is refused with its path at
// once; opening it for reading would block until something wrote to it.
func TestLoadRefusesFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipe := filepath.Join(dir, DefaultFile)
	fifotest.Make(t, pipe)
	errs := make(chan error, 1)
	go func() {
		_, err := Load(dir)
		errs <- err
	}()
	for range 1 {
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
