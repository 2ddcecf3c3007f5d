package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

func TestMemoryLimitFor(t *testing.T) {
	for _, c := range []struct {
		acs  int
		want int64
	}{{1, 256 << 20}, {10000, 256 << 20}, {50000, 50000 * 8 << 10}, {100000, defaultMemoryLimit}, {1000000, defaultMemoryLimit}} {
		if got := memoryLimitFor(c.acs); got != c.want {
			t.Errorf("memoryLimitFor(%d) = %d MiB, want %d MiB", c.acs, got>>20, c.want>>20)
		}
	}
}

// TestEphemeralBlobsGoWithClose: a temporary folder's blobs are removed while the server
// shuts down, and Close returns only once they are gone (the caller then removes the
// rest); a kept folder's blobs stay.
func TestEphemeralBlobsGoWithClose(t *testing.T) {
	for _, ephemeral := range []bool{true, false} {
		dir := t.TempDir()
		e := &embedded{}
		if _, err := e.open(t.Context(), dir, ephemeral, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := blob.PutBytes(t.Context(), e.Store, "default", []byte("an artifact"), "text/plain"); err != nil {
			t.Fatal(err)
		}
		e.Close()
		_, err := os.Stat(filepath.Join(dir, "blobs"))
		if gone := errors.Is(err, fs.ErrNotExist); gone != ephemeral {
			t.Errorf("ephemeral %v: blobs folder after Close: %v", ephemeral, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "nats")); err != nil {
			t.Errorf("ephemeral %v: the NATS store is the caller's to remove: %v", ephemeral, err)
		}
	}
}
