//go:build unix

package batch

import (
	"path/filepath"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
)

// TestLoadRefusesFIFO: a batch file that is a named pipe is refused with its path at
// once; opening it for reading would block until something wrote to it.
func TestLoadRefusesFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipe := filepath.Join(dir, DefaultFile)
	fifotest.Make(t, pipe)
	fifotest.Refused(t, dir, func() error {
		_, err := Load(dir)
		return err
	})
}
