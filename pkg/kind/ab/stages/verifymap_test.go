package stages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
	"github.com/tribunal-dev/tribunal/pkg/batch"
)

func TestVerifyMap(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("verify.json", `{"AC-7": {"reference": "ref/seven.png", "ours": "ours/seven.png"}, "AC-8": {"ours": "o8.md"}}`)
	write("docs/VERIFY.md", "# Verify\n\nAC-1 is about notes (prose, ignored).\n\n- AC-1: reference=ref/notes.md ours=ours/notes.md\n  AC-2: ours=o/2.txt reference=r/2.txt\n")
	write("bad.json", `{"AC-7": {"refrence": "x"}}`)
	write("bad.md", "AC-1: reference=a.md\n")

	tests := []struct {
		name, verify string
		want         map[string][2]string // id -> reference, ours
		wantErr      string
	}{
		{"none", "", nil, ""},
		{"json", "verify.json", map[string][2]string{"AC-7": {"ref/seven.png", "ours/seven.png"}, "AC-8": {"", "o8.md"}}, ""},
		{"markdown in sub-folder", "docs/VERIFY.md", map[string][2]string{"AC-1": {"ref/notes.md", "ours/notes.md"}, "AC-2": {"r/2.txt", "o/2.txt"}}, ""},
		{"absolute path", filepath.Join(dir, "verify.json"), map[string][2]string{"AC-7": {"ref/seven.png", "ours/seven.png"}, "AC-8": {"", "o8.md"}}, ""},
		{"missing file", "nope.json", nil, "verify"},
		{"bad json key", "bad.json", nil, "refrence"},
		{"bad line", "bad.md", nil, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &batch.Batch{Path: filepath.Join(dir, batch.DefaultFile), Dir: dir}
			b.Verify = tt.verify
			m, err := LoadVerifyMap(b)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("LoadVerifyMap = %v; want error", m)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), b.Path) {
					t.Errorf("error %q should name the batch file and contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadVerifyMap: %v", err)
			}
			if tt.want == nil {
				if m != nil {
					t.Errorf("LoadVerifyMap = %v; want nil without a verify key", m)
				}
				return
			}
			if len(m) != len(tt.want) {
				t.Fatalf("LoadVerifyMap = %v; want %v", m, tt.want)
			}
			for id, w := range tt.want {
				p, ok := m[id]
				if !ok || p.Reference != w[0] || p.Ours != w[1] {
					t.Errorf("VerifyMap[%s] = %+v; want reference=%q ours=%q", id, p, w[0], w[1])
				}
			}
		})
	}
}

// TestVerifyMapFromLoadedBatch: the verify key of a batch file resolves against the
// batch folder, not the working directory.
func TestVerifyMapFromLoadedBatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "VERIFY.md"), []byte("AC-1: reference=r.md ours=o.md\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := "version: 1\nverify: VERIFY.md\nacs:\n  - id: AC-1\n"
	if err := os.WriteFile(filepath.Join(dir, batch.DefaultFile), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	b, err := batch.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadVerifyMap(b)
	if err != nil {
		t.Fatal(err)
	}
	if p := m["AC-1"]; p.Reference != "r.md" || p.Ours != "o.md" {
		t.Errorf("VerifyMap = %v", m)
	}
}

// TestVerifyMapRefusesFIFO: a verify map that is a named pipe is refused with its path at
// once; opening it for reading would block until something wrote to it.
func TestVerifyMapRefusesFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifotest.Make(t, filepath.Join(dir, "verify.json"))
	fifotest.Refused(t, dir, func() error {
		_, err := LoadVerifyMap(&batch.Batch{Path: filepath.Join(dir, "b.yaml"), Dir: dir, File: batch.File{Verify: "verify.json"}})
		return err
	})
}
