package fileblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/blobtest"
)

func newPackStore(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	opts.Pack = true
	s, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPackConformance runs the driver suite against a pack-mode store: small objects
// are packed, the 5 MiB and MaxSize cases go to files.
func TestPackConformance(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, blobtest.Harness{
		MaxSize: testMaxSize,
		New: func(t *testing.T) blob.Store {
			return newPackStore(t, t.TempDir(), Options{MaxSize: testMaxSize})
		},
		Corrupt: func(t *testing.T, bs blob.Store, ref blob.Ref) {
			s := bs.(*Store)
			path, off, size, err := s.Locate(ref)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(path, packExt) {
				t.Fatalf("a small object is in %s, not a pack", path)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, off+size/2); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0xff
			if _, err := f.WriteAt(b, off+size/2); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func putN(t *testing.T, s blob.Store, tenant string, n int, prefix string) []blob.Attrs {
	t.Helper()
	out := make([]blob.Attrs, n)
	for i := range n {
		a, err := blob.PutBytes(t.Context(), s, tenant, fmt.Appendf(nil, "%s object %d", prefix, i), fmt.Sprintf("text/x-%d", i%3))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

func mustReadAll(t *testing.T, s blob.Store, as []blob.Attrs) {
	t.Helper()
	for _, a := range as {
		_, got, err := blob.ReadAll(t.Context(), s, a.Ref)
		if err != nil || got != a {
			t.Fatalf("ReadAll(%s) = %+v, %v; want %+v", a.Ref, got, err, a)
		}
	}
}

func packFiles(t *testing.T, dir, tenant string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, tenant, "packs", "*"+packExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPackLayout: small objects go into one pack and create no per-object file; a Put
// past the threshold is a file as before; a reopened store finds everything.
func TestPackLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newPackStore(t, dir, Options{})
	small := putN(t, s, "acme", 50, "small")
	big := bytes.Repeat([]byte("b"), packThreshold+1)
	ba, err := blob.PutBytes(t.Context(), s, "acme", big, "application/x-big")
	if err != nil {
		t.Fatal(err)
	}
	edge := bytes.Repeat([]byte("e"), packThreshold)
	ea, err := blob.PutBytes(t.Context(), s, "acme", edge, "")
	if err != nil {
		t.Fatal(err)
	}
	if packs := packFiles(t, dir, "acme"); len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	var files []string
	filepath.WalkDir(filepath.Join(dir, "acme", "sha256"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, filepath.Base(p))
		}
		return nil
	})
	if len(files) != 2 || !strings.HasPrefix(files[0], ba.Ref.SHA256) {
		t.Fatalf("files: %v, want only the large object and its meta", files)
	}
	if p, _, _, _ := s.Locate(ea.Ref); !strings.HasSuffix(p, packExt) {
		t.Fatalf("an object of exactly the threshold is in %s", p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reading does not depend on the switch.
	for _, opts := range []Options{{}, {Pack: true}} {
		r, err := New(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		mustReadAll(t, r, append(small, ba, ea))
		r.Close()
	}
}

// TestPackTornTail: a pack cut mid-record (a crash during an append) keeps its whole
// records readable; the torn one is gone, and Puts after it work.
func TestPackTornTail(t *testing.T) {
	t.Parallel()
	// Cut in the last record's data, and in its header.
	for _, cut := range []int64{-3, 20} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) { t.Parallel(); testTornTail(t, cut) })
	}
}

func testTornTail(t *testing.T, cut int64) {
	dir := t.TempDir()
	s := newPackStore(t, dir, Options{})
	as := putN(t, s, "acme", 10, "torn")
	last := as[len(as)-1]
	_, off, size, err := s.Locate(last.Ref)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	pk := packFiles(t, dir, "acme")[0]
	end := off + size + cut // cut < 0: from the end
	if cut > 0 {
		end = off - packHeader - int64(len(last.MediaType)) + cut
	}
	if err := os.Truncate(pk, end); err != nil {
		t.Fatal(err)
	}
	r := newPackStore(t, dir, Options{})
	mustReadAll(t, r, as[:len(as)-1])
	if _, err := r.Stat(t.Context(), last.Ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("torn record: %v, want ErrNotFound", err)
	}
	again, err := blob.PutBytes(t.Context(), r, "acme", []byte("torn object 9"), "text/x-0")
	if err != nil || again != last {
		t.Fatalf("Put of the torn object again: %+v %v", again, err)
	}
	more := putN(t, r, "acme", 3, "after")
	mustReadAll(t, r, append(more, again))

	// Garbage mid-pack: the records before it stay, a scan stops there.
	r.Close()
	pk2 := packFiles(t, dir, "acme")
	for _, p := range pk2 {
		if p == pk {
			continue
		}
		b, _ := os.ReadFile(p)
		b[5] ^= 0xff // the first record's header checksum
		os.WriteFile(p, b, 0o640)
	}
	// With the index file the records are found without a scan (and their bytes are
	// intact, which every read checks); a scan is what meets the damage, so the file
	// goes, as in a folder an older version wrote.
	if err := os.Remove(filepath.Join(dir, "acme", "packs", indexName)); err != nil {
		t.Fatal(err)
	}
	r2 := newPackStore(t, dir, Options{})
	mustReadAll(t, r2, as[:len(as)-1])
	if _, err := r2.Stat(t.Context(), more[0].Ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("record behind a damaged header: %v, want ErrNotFound", err)
	}
}

// TestPackTwoStores: two stores on one folder each write their own pack, and each finds
// the other's objects after a miss.
func TestPackTwoStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newPackStore(t, dir, Options{NoSync: true})
	b := newPackStore(t, dir, Options{NoSync: true})
	// b loads its (empty) view first, so finding a's objects needs a rescan.
	if _, err := b.Stat(t.Context(), blob.Ref{Tenant: "acme", SHA256: strings.Repeat("0", 64)}); !errors.Is(err, blob.ErrNotFound) {
		t.Fatal(err)
	}
	fromA := putN(t, a, "acme", 20, "a")
	fromB := putN(t, b, "acme", 20, "b")
	mustReadAll(t, b, fromA)
	mustReadAll(t, a, fromB)
	more := putN(t, a, "acme", 5, "a-more")
	mustReadAll(t, b, more)
	if packs := packFiles(t, dir, "acme"); len(packs) != 2 {
		t.Fatalf("packs: %v, want one per store", packs)
	}
}

// TestPackOldFiles: a pack-mode store reads per-object files of an older store, and a
// Put of bytes a file holds stores nothing new.
func TestPackOldFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	as := putN(t, old, "acme", 5, "old")
	old.Close()
	s := newPackStore(t, dir, Options{})
	mustReadAll(t, s, as)
	again, err := blob.PutBytes(t.Context(), s, "acme", []byte("old object 1"), "text/x-other")
	if err != nil || again != as[1] {
		t.Fatalf("Put over a file = %+v %v, want %+v", again, err, as[1])
	}
	if packs := packFiles(t, dir, "acme"); len(packs) != 0 {
		t.Fatalf("a Put of stored bytes wrote %v", packs)
	}
}

// TestPackDeleteCompacts: Delete hides a packed object at once; Close rewrites its pack
// without it, so a fresh store does not find it, and a Put of the same bytes after the
// Delete survives the compaction.
func TestPackDeleteCompacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := newPackStore(t, dir, Options{})
	as := putN(t, s, "acme", 30, "del")
	other := putN(t, s, "globex", 3, "del")
	s.Close()
	pk := packFiles(t, dir, "acme")[0]
	before, _ := os.Stat(pk)

	// Deleted through a store without the switch, as `tribunal prune` opens it.
	p, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as[:10] {
		if err := p.Delete(ctx, a.Ref); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Stat(ctx, as[0].Ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The compaction writes a new pack under a name of its own and removes the old.
	if _, err := os.Stat(pk); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the compacted pack is still there: %v", err)
	}
	compacted := packFiles(t, dir, "acme")
	if len(compacted) != 1 {
		t.Fatalf("packs after compaction: %v", compacted)
	}
	after, _ := os.Stat(compacted[0])
	if after.Size() >= before.Size() {
		t.Fatalf("pack %d bytes after deleting a third, %d before", after.Size(), before.Size())
	}

	// Delete then Put again, in one pack-mode store.
	q := newPackStore(t, dir, Options{})
	if err := q.Delete(ctx, as[10].Ref); err != nil {
		t.Fatal(err)
	}
	re, err := blob.PutBytes(ctx, q, "acme", []byte("del object 10"), "text/x-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, as[11].Ref); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	fresh := newPackStore(t, dir, Options{})
	for _, a := range append(as[:10:10], as[11]) {
		if _, err := fresh.Stat(ctx, a.Ref); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("pruned %s: %v, want ErrNotFound", a.Ref, err)
		}
	}
	mustReadAll(t, fresh, append(append(as[12:], other...), re))

	// Deleting everything removes the pack.
	for _, a := range append(as[12:], re) {
		if err := fresh.Delete(ctx, a.Ref); err != nil {
			t.Fatal(err)
		}
	}
	fresh.Close()
	if left := packFiles(t, dir, "acme"); len(left) != 0 {
		t.Fatalf("an empty pack is kept: %v", left)
	}
}

// TestPackWalk lists packed objects and files once each.
func TestPackWalk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	old, _ := New(dir, Options{NoSync: true})
	file := putN(t, old, "acme", 2, "file")
	old.Close()
	s := newPackStore(t, dir, Options{NoSync: true})
	packed := putN(t, s, "acme", 4, "packed")
	b := putN(t, s, "globex", 1, "packed")
	seen := map[blob.Ref]int64{}
	if err := s.Walk(ctx, func(ref blob.Ref, size int64) error {
		if _, dup := seen[ref]; dup {
			t.Errorf("walk saw %s twice", ref)
		}
		seen[ref] = size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	all := append(append(file, packed...), b...)
	if len(seen) != len(all) {
		t.Fatalf("walk saw %d objects, want %d", len(seen), len(all))
	}
	for _, a := range all {
		if seen[a.Ref] != a.Size {
			t.Fatalf("walk: %s size %d, want %d", a.Ref, seen[a.Ref], a.Size)
		}
	}
}

// TestPackConcurrentSynced: concurrent Puts with fsync on share fsyncs and every object
// is readable afterwards, from this store and a fresh one.
func TestPackConcurrentSynced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newPackStore(t, dir, Options{})
	const n = 64
	var wg sync.WaitGroup
	got := make([]blob.Attrs, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = blob.PutBytes(t.Context(), s, "acme", fmt.Appendf(nil, "concurrent %d", i), "text/plain")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	mustReadAll(t, s, got)
	p := s.tenants["acme"].cur
	if p.synced != p.end.Load() {
		t.Fatalf("synced to %d of %d bytes", p.synced, p.end.Load())
	}
	s.Close()
	mustReadAll(t, newPackStore(t, dir, Options{}), got)
}

// TestPackRoll: a writer starts a new pack past the size cap.
func TestPackRoll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newPackStore(t, dir, Options{NoSync: true})
	var as []blob.Attrs
	chunk := bytes.Repeat([]byte("r"), packThreshold-100)
	for i := 0; int64(i)*int64(len(chunk)) <= packCap; i++ {
		chunk[0] = byte(i)
		chunk[1] = byte(i >> 8)
		a, err := blob.PutBytes(t.Context(), s, "acme", chunk, "")
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	if packs := packFiles(t, dir, "acme"); len(packs) != 2 {
		t.Fatalf("packs after %d bytes: %d", len(as)*len(chunk), len(packs))
	}
	s.Close()
	mustReadAll(t, newPackStore(t, dir, Options{}), as)
}

// TestPackDeleteEveryCopy: two writers that packed the same bytes (each before it saw
// the other's pack) leave two records; a Delete removes both, so the object does not
// come back from the other pack.
func TestPackDeleteEveryCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := newPackStore(t, dir, Options{})
	b := newPackStore(t, dir, Options{})
	putN(t, a, "acme", 1, "warm") // both load their (empty) view of the packs first
	putN(t, b, "acme", 1, "warm-b")
	both := putN(t, a, "acme", 1, "twice")[0]
	if again := putN(t, b, "acme", 1, "twice")[0]; again != both {
		t.Fatalf("%+v != %+v", again, both)
	}
	a.Close()
	b.Close()
	p, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, both.Ref); err != nil {
		t.Fatal(err)
	}
	p.Close()
	fresh := newPackStore(t, dir, Options{})
	if _, err := fresh.Stat(ctx, both.Ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("deleted object: %v, want ErrNotFound", err)
	}
}

// TestPackDeferredPut: a deferred Put returns before its record is synced; Sync (or
// Close) covers it, and a Put of the same bytes that is not deferred syncs it before it
// returns, since its caller will name the object in an event.
func TestPackDeferredPut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newPackStore(t, dir, Options{})
	put := func(data string, deferred bool) blob.Attrs {
		t.Helper()
		a, err := s.Put(t.Context(), "acme", strings.NewReader(data), blob.PutOptions{Deferred: deferred})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	p := func() *pack { return s.tenants["acme"].cur }
	a := put("deferred one", true)
	b := put("deferred two", true)
	if p().synced != 0 {
		t.Fatalf("deferred Puts synced the pack to %d", p().synced)
	}
	mustReadAll(t, s, []blob.Attrs{a, b}) // visible at once in this process
	// The same bytes again, not deferred: synced through the first record's end.
	put("deferred one", false)
	if p().synced < dataOffOf(t, s, a)+a.Size {
		t.Fatalf("a durable Put of deferred bytes returned with the pack synced to %d", p().synced)
	}
	put("deferred three", true)
	if err := blob.Sync(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if p().synced != p().end.Load() {
		t.Fatalf("Sync covered %d of %d bytes", p().synced, p().end.Load())
	}
	c := put("deferred four", true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if p().synced != p().end.Load() {
		t.Fatalf("Close left %d of %d bytes unsynced", p().end.Load()-p().synced, p().end.Load())
	}
	mustReadAll(t, newPackStore(t, dir, Options{}), []blob.Attrs{a, b, c})
	if err := s.Sync(t.Context()); err == nil {
		t.Fatal("Sync of a closed store succeeded")
	}
}

// dataOffOf is where a packed object's data starts.
func dataOffOf(t *testing.T, s *Store, a blob.Attrs) int64 {
	t.Helper()
	l, _, mt, ok := s.findPacked(a.Ref, false)
	if !ok {
		t.Fatalf("%s is not packed", a.Ref)
	}
	return dataOff(l, mt)
}
