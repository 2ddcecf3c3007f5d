package fileblob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// buildLarge fills a pack-mode store in dir with n distinct 100 B objects (no fsync)
// and closes it, returning a few of their refs.
func buildLarge(tb testing.TB, dir string, n int) []blob.Ref {
	tb.Helper()
	s, err := New(dir, Options{Pack: true, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	var refs []blob.Ref
	obj := make([]byte, 100)
	for i := range n {
		binary.LittleEndian.PutUint64(obj, uint64(i))
		a, err := s.Put(ctx, "t", bytes.NewReader(obj), blob.PutOptions{MediaType: "application/json"})
		if err != nil {
			tb.Fatal(err)
		}
		if i%(n/16+1) == 0 || i == n-1 {
			refs = append(refs, a.Ref)
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return refs
}

// openMeasured opens the store in dir, stats every ref (the first lookup loads the
// tenant's index) and returns the store with the time that took and the heap it
// retains.
func openMeasured(tb testing.TB, dir string, refs []blob.Ref) (*Store, time.Duration, int64) {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s, err := New(dir, Options{Pack: true, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range refs {
		if _, err := s.Stat(context.Background(), r); err != nil {
			tb.Fatal(err)
		}
	}
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	return s, took, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// BenchmarkOpenLarge is the cost of opening a folder of many packed objects: the time
// from New to the first lookups answered and the heap the open store retains. The
// objects are TRIBUNAL_BLOB_OPEN_N (1,000,000 unless set), built once.
//
//	go test ./pkg/blob/fileblob -run '^$' -bench OpenLarge -benchtime 3x
func BenchmarkOpenLarge(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("TRIBUNAL_BLOB_OPEN_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("TRIBUNAL_BLOB_OPEN_N: %v", err)
		}
	}
	dir := b.TempDir()
	start := time.Now()
	refs := buildLarge(b, dir, n)
	b.Logf("built %d objects in %v", n, time.Since(start).Round(time.Millisecond))
	// A folder as an older version left it, without the index file: the first open
	// scans the packs and writes the file (at Close).
	if err := os.Remove(filepath.Join(dir, "t", "packs", indexName)); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	s, took, h := openMeasured(b, dir, refs)
	start = time.Now()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("without an index file: opened in %v (%.1f B of heap per object), closed in %v", took.Round(time.Millisecond), float64(h)/float64(n), time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	var total time.Duration
	var heap int64
	for range b.N {
		s, took, h := openMeasured(b, dir, refs)
		total += took
		heap += h
		runtime.KeepAlive(s)
		s.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "open-ms")
	b.ReportMetric(float64(heap)/float64(b.N)/float64(n), "heap-B/obj")
}

// BenchmarkPackGetReopened is Open and a verified read of one of TRIBUNAL_BLOB_OPEN_N
// (1,000,000 unless set) packed 100 B objects in a store opened on the folder after
// they were written: the case of a process reading a batch's folder (an audit, the
// viewer), whose lookups go to the index file.
func BenchmarkPackGetReopened(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("TRIBUNAL_BLOB_OPEN_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("TRIBUNAL_BLOB_OPEN_N: %v", err)
		}
	}
	dir := b.TempDir()
	buildLarge(b, dir, n)
	s, err := New(dir, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	refs := make([]blob.Ref, 4096)
	obj := make([]byte, 100)
	for i := range refs {
		binary.LittleEndian.PutUint64(obj, uint64((i*7919)%n))
		sum := sha256.Sum256(obj)
		refs[i] = blob.Ref{Tenant: "t", SHA256: hex.EncodeToString(sum[:])}
	}
	if _, err := s.Stat(ctx, refs[0]); err != nil { // loads the index
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		rc, _, err := s.Open(ctx, refs[i%len(refs)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
}

// BenchmarkOpenFolder opens the blob folder TRIBUNAL_BLOB_FOLDER (a copy: the index
// file is written into it) and closes it, twice: the first open of a folder an older
// version wrote rebuilds the index file from the packs, the second reads the file.
//
//	TRIBUNAL_BLOB_FOLDER=/tmp/copy go test ./pkg/blob/fileblob -run '^$' -bench OpenFolder -benchtime 1x
func BenchmarkOpenFolder(b *testing.B) {
	dir := os.Getenv("TRIBUNAL_BLOB_FOLDER")
	if dir == "" {
		b.Skip("TRIBUNAL_BLOB_FOLDER names no folder to open")
	}
	tenants, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	missing := blob.Ref{SHA256: hex.EncodeToString(make([]byte, 32))}
	for range b.N {
		for round := range 2 {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			s, err := New(dir, Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			objects := 0
			for _, t := range tenants {
				missing.Tenant = t.Name()
				if _, err := s.Stat(context.Background(), missing); err == nil {
					b.Fatal("the zero digest is stored")
				}
				objects += s.tenantIdx(t.Name()).size()
			}
			opened := time.Since(start)
			runtime.GC()
			runtime.ReadMemStats(&after)
			start = time.Now()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.Logf("open %d: %d objects, opened in %v with %.1f MB of heap, closed in %v", round+1, objects, opened.Round(time.Millisecond),
				float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1e6, time.Since(start).Round(time.Millisecond))
		}
	}
}
