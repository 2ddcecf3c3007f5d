package fileblob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/blobtest"
)

const testMaxSize = 6 << 20

func TestConformance(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, blobtest.Harness{
		MaxSize: testMaxSize,
		New: func(t *testing.T) blob.Store {
			s, err := New(t.TempDir(), Options{MaxSize: testMaxSize})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Corrupt: func(t *testing.T, bs blob.Store, ref blob.Ref) {
			p := bs.(*Store).dataPath(ref)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				t.Fatal("cannot corrupt an empty object in place")
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o640); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := blob.PutBytes(t.Context(), s, "acme", []byte("hello"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "acme", "sha256", a.Ref.SHA256[:2], a.Ref.SHA256)
	if b, err := os.ReadFile(data); err != nil || string(b) != "hello" {
		t.Fatalf("data file %s: %q, %v", data, b, err)
	}
	if b, err := os.ReadFile(data + ".meta"); err != nil || !strings.Contains(string(b), `"media_type":"text/plain"`) {
		t.Fatalf("meta file: %q, %v", b, err)
	}
	// No temporary files are left behind, after success or failure.
	_, _ = s.Put(t.Context(), "acme", bytes.NewReader([]byte("x")), blob.PutOptions{ExpectedSHA256: a.Ref.SHA256})
	_, _ = s.Put(t.Context(), "acme", &endlessZeros{}, blob.PutOptions{})
	tmps, _ := filepath.Glob(filepath.Join(dir, "acme", "tmp", ".tmp-*"))
	if len(tmps) != 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
}

type endlessZeros struct{}

func (endlessZeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A crash between writing the metadata and renaming the data leaves an orphan meta
// (and maybe a temp file): the object must not exist, and a later Put must work.
func TestCrashLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("half written")
	h := sha256.Sum256(data)
	ref := blob.Ref{Tenant: "acme", SHA256: hex.EncodeToString(h[:])}
	od := filepath.Join(dir, "acme", "sha256", ref.SHA256[:2])
	if err := os.MkdirAll(od, 0o750); err != nil {
		t.Fatal(err)
	}
	orphan := `{"sha256":"` + ref.SHA256 + `","size":12,"media_type":"text/x-old"}`
	if err := os.WriteFile(filepath.Join(od, ref.SHA256+".meta"), []byte(orphan), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(od, ".tmp-123"), data[:4], 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Stat(t.Context(), ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat with only an orphan meta: %v, want ErrNotFound", err)
	}
	got, err := blob.PutBytes(t.Context(), s, "acme", data, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	if got.MediaType != "text/plain" {
		t.Fatalf("Put over orphan meta kept %q", got.MediaType)
	}
	b, st, err := blob.ReadAll(t.Context(), s, ref)
	if err != nil || string(b) != string(data) || st.MediaType != "text/plain" {
		t.Fatalf("ReadAll = %q %+v %v", b, st, err)
	}
}

// A damaged object (wrong length) is repaired by putting the right bytes again.
func TestPutRepairsTruncatedObject(t *testing.T) {
	t.Parallel()
	s, err := New(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("complete content")
	a, err := blob.PutBytes(t.Context(), s, "acme", data, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.dataPath(a.Ref), data[:5], 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := blob.ReadAll(t.Context(), s, a.Ref); !errors.Is(err, blob.ErrDigestMismatch) {
		t.Fatalf("ReadAll of truncated object: %v, want ErrDigestMismatch", err)
	}
	if _, err := blob.PutBytes(t.Context(), s, "acme", data, "text/plain"); err != nil {
		t.Fatal(err)
	}
	if b, _, err := blob.ReadAll(t.Context(), s, a.Ref); err != nil || string(b) != string(data) {
		t.Fatalf("ReadAll after repair: %q, %v", b, err)
	}
}

func TestMustExist(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "not-mounted")
	if _, err := New(missing, Options{MustExist: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("New(MustExist) on a missing dir: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("New(MustExist) created the directory")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := New(f, Options{}); err == nil {
		t.Fatal("New on a regular file succeeded")
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s, err := New(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := blob.PutBytes(context.Background(), s, "acme", []byte("x"), ""); err == nil {
		t.Fatal("Put after Close succeeded")
	}
}

func TestOpenURL(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	cases := []struct {
		url     string
		wantDir string
		wantMax int64
	}{
		{"file://" + filepath.Join(base, "abs"), filepath.Join(base, "abs"), blob.DefaultMaxSize},
		{"file://rel/dir", filepath.Join(base, "rel", "dir"), blob.DefaultMaxSize},
		{"file:opaque/dir", filepath.Join(base, "opaque", "dir"), blob.DefaultMaxSize},
		{"plain/path", filepath.Join(base, "plain", "path"), blob.DefaultMaxSize},
		{filepath.Join(base, "bare-abs"), filepath.Join(base, "bare-abs"), blob.DefaultMaxSize},
		{"file:///" + strings.TrimPrefix(filepath.Join(base, "q"), "/") + "?create=true&max_size=1024", filepath.Join(base, "q"), 1024},
	}
	for _, c := range cases {
		st, err := blob.OpenURL(t.Context(), c.url)
		if err != nil {
			t.Fatalf("OpenURL(%q): %v", c.url, err)
		}
		fs := st.(*Store)
		if fs.Dir() != c.wantDir || fs.MaxSize() != c.wantMax {
			t.Errorf("OpenURL(%q) = dir %s max %d, want %s %d", c.url, fs.Dir(), fs.MaxSize(), c.wantDir, c.wantMax)
		}
		if _, err := os.Stat(c.wantDir); err != nil {
			t.Errorf("OpenURL(%q) did not create the directory: %v", c.url, err)
		}
	}

	bad := []struct{ url, want string }{
		{"file://" + filepath.Join(base, "nope") + "?create=false", "no such file"},
		{"file://x?create=maybe", "create"},
		{"file://x?max_size=-1", "max_size"},
		{"file://x?colour=blue", `"colour"`},
		{"file://", "no directory"},
	}
	for _, c := range bad {
		_, err := blob.OpenURL(t.Context(), c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenURL(%q) = %v, want an error mentioning %s", c.url, err, c.want)
		}
	}
}

// TestWalkAndDelete: Walk lists every object of every tenant (never a temporary or
// metadata file), and Delete removes an object with its metadata, leaving the others.
func TestWalkAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := blob.PutBytes(ctx, s, "team-a", []byte("one"), "text/plain")
	b, _ := blob.PutBytes(ctx, s, "team-a", []byte("two"), "text/plain")
	c, _ := blob.PutBytes(ctx, s, "team-b", []byte("one"), "text/plain")
	os.WriteFile(filepath.Join(s.Dir(), "team-a", "tmp", ".tmp-123"), []byte("half"), 0o640)
	seen := map[blob.Ref]int64{}
	if err := s.Walk(ctx, func(ref blob.Ref, size int64) error { seen[ref] = size; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || seen[a.Ref] != 3 || seen[b.Ref] != 3 || seen[c.Ref] != 3 {
		t.Fatalf("walk saw %v", seen)
	}
	if err := s.Delete(ctx, a.Ref); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, a.Ref); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := s.Stat(ctx, a.Ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("deleted object: %v", err)
	}
	if _, err := os.Stat(s.dataPath(a.Ref) + metaExt); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("metadata left behind: %v", err)
	}
	// The same bytes under another tenant are another object.
	if data, _, err := blob.ReadAll(ctx, s, c.Ref); err != nil || string(data) != "one" {
		t.Fatalf("team-b's copy: %q %v", data, err)
	}
	if _, _, err := blob.ReadAll(ctx, s, b.Ref); err != nil {
		t.Fatal(err)
	}
}
