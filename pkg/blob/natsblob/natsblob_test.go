package natsblob

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/blobtest"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
)

const testMaxSize = 6 << 20

// newStore opens a store on a bucket of its own.
func newStore(t *testing.T, js jetstream.JetStream, maxSize int64) *Store {
	t.Helper()
	s, err := New(t.Context(), js, Options{Bucket: "t" + nextBucket(), MaxSize: maxSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var buckets atomic.Int64

// nextBucket names a fresh bucket: the suite's cases run in parallel on one server.
func nextBucket() string { return fmt.Sprint(buckets.Add(1)) }

// corrupt replaces the chunk of a one-chunk object with other bytes of the same length,
// behind the driver's back: its metadata (size, digest, media type) stays.
func corrupt(t *testing.T, js jetstream.JetStream, s *Store, ref blob.Ref) {
	t.Helper()
	oi, err := s.obs.GetInfo(t.Context(), ref.Key())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), StreamName(s.bucket))
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(t.Context(), ChunkSubject(s.bucket, oi.NUID))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) == 0 {
		t.Fatal("cannot corrupt an empty object in place")
	}
	data := bytes.Clone(m.Data)
	data[len(data)/2] ^= 0xff
	if err := stream.DeleteMsg(t.Context(), m.Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), ChunkSubject(s.bucket, oi.NUID), data); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	blobtest.Run(t, blobtest.Harness{
		MaxSize: testMaxSize,
		New:     func(t *testing.T) blob.Store { return newStore(t, js, testMaxSize) },
		Corrupt: func(t *testing.T, bs blob.Store, ref blob.Ref) { corrupt(t, js, bs.(*Store), ref) },
	})
}

// The all-in-one mode's store: small objects in the object store, large ones in files.
func TestTieredConformance(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	blobtest.Run(t, blobtest.Harness{
		MaxSize: testMaxSize,
		New: func(t *testing.T) blob.Store {
			files, err := fileblob.New(t.TempDir(), fileblob.Options{MaxSize: testMaxSize})
			if err != nil {
				t.Fatal(err)
			}
			return &blob.Tiered{Small: newStore(t, js, 64<<10), Large: files, Threshold: 64 << 10}
		},
		Corrupt: func(t *testing.T, bs blob.Store, ref blob.Ref) {
			ts := bs.(*blob.Tiered)
			small := ts.Small.(*Store)
			if _, err := small.Stat(t.Context(), ref); err == nil {
				corrupt(t, js, small, ref)
				return
			}
			// The file driver's layout, as its own TestLayout pins it.
			files := ts.Large.(*fileblob.Store)
			p := filepath.Join(files.Dir(), ref.Tenant, "sha256", ref.SHA256[:2], ref.SHA256)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o640); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// Small objects are written without ObjectStore.Put, in its layout: the object store
// itself must read them back, digest-checked, with their metadata.
func TestObjectStoreReadsWhatItWrites(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	s := newStore(t, js, testMaxSize)
	for _, data := range [][]byte{nil, []byte("a small artifact"), bytes.Repeat([]byte("x"), maxChunk)} {
		a, err := blob.PutBytes(t.Context(), s, "acme", data, "text/markdown")
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.obs.GetBytes(t.Context(), a.Ref.Key())
		if err != nil {
			t.Fatalf("object store Get of %d bytes: %v", len(data), err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("object store read %d bytes back, want %d", len(got), len(data))
		}
		oi, err := s.obs.GetInfo(t.Context(), a.Ref.Key())
		if err != nil {
			t.Fatal(err)
		}
		if oi.Size != uint64(len(data)) || oi.Metadata[metaMediaType] != "text/markdown" {
			t.Fatalf("object info %+v", oi)
		}
	}
}

// The metadata cache drops its oldest generation when full, never everything at once.
func TestInfoCacheKeepsTheRecent(t *testing.T) {
	var c infoCache
	ref := func(i int) blob.Ref { return blob.Ref{Tenant: "acme", SHA256: fmt.Sprintf("%064x", i)} }
	for i := range maxCachedInfos {
		c.put(info{attrs: blob.Attrs{Ref: ref(i)}})
	}
	for _, i := range []int{0, maxCachedInfos / 2, maxCachedInfos - 1} {
		if _, ok := c.get(ref(i)); !ok {
			t.Fatalf("object %d of %d not cached", i, maxCachedInfos)
		}
	}
	c.put(info{attrs: blob.Attrs{Ref: ref(maxCachedInfos)}})
	for _, i := range []int{maxCachedInfos / 2, maxCachedInfos - 1, maxCachedInfos} {
		if _, ok := c.get(ref(i)); !ok {
			t.Fatalf("object %d not cached after the cache turned over", i)
		}
	}
	if _, ok := c.get(ref(0)); ok {
		t.Fatal("the oldest object is cached past the bound")
	}
}
