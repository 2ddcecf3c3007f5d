package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
)

// packedObjects opens a state folder's blobs as `tribunal prune` does (no pack switch)
// and says where each object is: in a pack or a file, with the packs' total size.
func packedObjects(t *testing.T, blobs string) (packed, files map[blob.Ref]bool, packBytes int64) {
	t.Helper()
	s, err := fileblob.New(blobs, fileblob.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	packed, files = map[blob.Ref]bool{}, map[blob.Ref]bool{}
	err = s.Walk(context.Background(), func(ref blob.Ref, _ int64) error {
		path, _, _, err := s.Locate(ref)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".pack") {
			packed[ref] = true
		} else {
			files[ref] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(blobs, "*", "packs", "*.pack"))
	for _, p := range m {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		packBytes += st.Size()
	}
	return packed, files, packBytes
}

// TestRunPacksSmallBlobs: the all-in-one mode keeps a run's small blobs in pack files,
// not a file each; the read-only commands see them, and `tribunal prune` removes the
// pruned ones from the packs (a fresh store no longer finds them) and gives the space
// back.
func TestRunPacksSmallBlobs(t *testing.T) {
	dir := projectDir(t)
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart")
	if code != 1 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	id := batchID(t, stdout)
	blobs := filepath.Join(dir, ".tribunal", "blobs")
	packed, files, before := packedObjects(t, blobs)
	if len(packed) == 0 || len(files) != 0 {
		t.Fatalf("%d packed objects, %d files: want every small blob packed", len(packed), len(files))
	}
	if out, stderr, code := runState(t, dir, "results", "--batch", id); code != 1 || !strings.Contains(out, id) {
		t.Fatalf("results over packed blobs: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := runState(t, dir, "prune", "--older-than", "1ns"); code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, stderr)
	}
	left, _, after := packedObjects(t, blobs)
	if len(left) >= len(packed) || after >= before {
		t.Fatalf("after prune: %d of %d objects, packs %d of %d bytes", len(left), len(packed), after, before)
	}
	s, err := fileblob.New(blobs, fileblob.Options{Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gone := 0
	for ref := range packed {
		if left[ref] {
			continue
		}
		gone++
		if _, err := s.Stat(context.Background(), ref); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("pruned %s: %v, want ErrNotFound", ref, err)
		}
	}
	if gone == 0 {
		t.Fatal("prune removed nothing")
	}
}
