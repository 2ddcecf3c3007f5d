package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditOfAStateRecordedBefore: the state folder of a quickstart run recorded by
// tribunal at 19534ae (before costs, budgets and the batch judge mode) audits clean with
// this build, and its results still read. The audit re-derives every decision with
// today's rules, so a field added to a record since (the costs' were, written into every
// job record and the completion) must re-derive as it was recorded when its events carry
// none of it. Rebuild the archive only to add a state, never to make this pass.
func TestAuditOfAStateRecordedBefore(t *testing.T) {
	dir := t.TempDir()
	untar(t, filepath.Join("testdata", "state-19534ae.tar.gz"), dir)
	const batch = "quickstart-20261202T040501-f39f87"
	stdout, stderr, code := runState(t, dir, "audit", "--batch", batch)
	if code != 0 || !strings.Contains(stdout, "mismatches: 0") || !strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit of a state recorded at 19534ae: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runState(t, dir, "results", "--batch", batch)
	if code != 1 || !strings.Contains(stdout, "8 ACs, 6 compared, 2 blocked") {
		t.Fatalf("results of a state recorded at 19534ae: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// untar unpacks a gzipped tar of regular files and folders into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("%s: %s leaves the folder", archive, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
