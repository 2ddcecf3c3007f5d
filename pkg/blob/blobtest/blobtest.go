// Package blobtest is the conformance suite every blob.Store driver must pass. Services
// switch drivers by configuration alone, so the drivers must agree on every behaviour
// a caller can observe, errors included; running one suite against all of them is how
// that agreement is kept.
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// Harness adapts a driver to the suite.
type Harness struct {
	// New returns an empty store private to the calling test, and arranges its
	// cleanup with t.Cleanup. It is called from parallel subtests.
	New func(t *testing.T) blob.Store
	// Corrupt changes the stored bytes behind ref without going through the driver,
	// keeping the driver's own metadata (size, media type), so that only read
	// verification can notice.
	Corrupt func(t *testing.T, s blob.Store, ref blob.Ref)
	// MaxSize is the size limit of the stores New returns; blob.DefaultMaxSize when
	// zero. It must be at least 5 MiB for the large-object case.
	MaxSize int64
}

// Run runs the conformance suite as parallel subtests of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Corrupt == nil {
		t.Fatal("blobtest: Harness.New and Harness.Corrupt are required")
	}
	if h.MaxSize == 0 {
		h.MaxSize = blob.DefaultMaxSize
	}
	if h.MaxSize < 5<<20 {
		t.Fatalf("blobtest: Harness.MaxSize %d is below the 5 MiB large-object case", h.MaxSize)
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"DefaultMediaType", testDefaultMediaType},
		{"IdempotentPut", testIdempotentPut},
		{"TenantIsolation", testTenantIsolation},
		{"NotFound", testNotFound},
		{"ExpectedSHA256", testExpectedSHA256},
		{"SizeLimit", testSizeLimit},
		{"CorruptedObject", testCorrupted},
		{"InvalidRef", testInvalidRef},
		{"EmptyObject", testEmpty},
		{"LargeObject", testLarge},
		{"ConcurrentSameContent", testConcurrentSame},
		{"ConcurrentDifferentContent", testConcurrentDifferent},
		{"CancelledContext", testCancelled},
		{"Usage", testUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// testUsage holds a blob.Usager to counting a tenant's bytes and only its own: at least
// what was stored (a driver may add metadata), nothing for a tenant with no objects, and
// the same again for a repeated Put of the same content.
func testUsage(t *testing.T, h Harness) {
	s := h.New(t)
	if _, ok := s.(blob.Usager); !ok {
		t.Skip("the driver does not count a tenant's bytes (blob.Usager)")
	}
	ctx := context.Background()
	if n, err := blob.Usage(ctx, s, "usage-empty"); err != nil || n != 0 {
		t.Fatalf("usage of a tenant with nothing stored: %d, %v", n, err)
	}
	data := randomBytes(t, 300<<10)
	put(t, s, "usage-a", data, "text/plain")
	put(t, s, "usage-a", randomBytes(t, 1000), "text/plain")
	n, err := blob.Usage(ctx, s, "usage-a")
	if err != nil || n < int64(len(data))+1000 {
		t.Fatalf("usage after storing %d bytes: %d, %v", len(data)+1000, n, err)
	}
	put(t, s, "usage-a", data, "text/plain")
	if again, err := blob.Usage(ctx, s, "usage-a"); err != nil || again != n {
		t.Errorf("usage after storing the same bytes again: %d, was %d (%v)", again, n, err)
	}
	if other, err := blob.Usage(ctx, s, "usage-b"); err != nil || other != 0 {
		t.Errorf("another tenant's usage: %d, %v", other, err)
	}
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t *testing.T, s blob.Store, tenant string, data []byte, mediaType string) blob.Attrs {
	t.Helper()
	a, err := s.Put(t.Context(), tenant, bytes.NewReader(data), blob.PutOptions{MediaType: mediaType})
	if err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", tenant, len(data), err)
	}
	return a
}

func mustRead(t *testing.T, s blob.Store, ref blob.Ref, want []byte, wantType string) {
	t.Helper()
	got, attrs, err := blob.ReadAll(t.Context(), s, ref)
	if err != nil {
		t.Fatalf("ReadAll(%s): %v", ref, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ReadAll(%s): got %d bytes, want %d (content differs)", ref, len(got), len(want))
	}
	want2 := blob.Attrs{Ref: ref, Size: int64(len(want)), MediaType: wantType}
	if attrs != want2 {
		t.Fatalf("ReadAll(%s) attrs = %+v, want %+v", ref, attrs, want2)
	}
	st, err := s.Stat(t.Context(), ref)
	if err != nil {
		t.Fatalf("Stat(%s): %v", ref, err)
	}
	if st != want2 {
		t.Fatalf("Stat(%s) = %+v, want %+v", ref, st, want2)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte(`{"verdict":"pass","score":0.97}`)
	a := put(t, s, "acme", data, "application/json")
	want := blob.Attrs{Ref: blob.Ref{Tenant: "acme", SHA256: sum(data)}, Size: int64(len(data)), MediaType: "application/json"}
	if a != want {
		t.Fatalf("Put = %+v, want %+v", a, want)
	}
	mustRead(t, s, a.Ref, data, "application/json")

	// Parameters in a media type must survive: judges dispatch on them.
	typed := []byte("print('hi')\n")
	a2 := put(t, s, "acme", typed, "text/x-python; charset=utf-8")
	mustRead(t, s, a2.Ref, typed, "text/x-python; charset=utf-8")

	// Open hands out the same attrs and a reader that ends with io.EOF.
	rc, oa, err := s.Open(t.Context(), a.Ref)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rc.Close()
	if oa != want {
		t.Fatalf("Open attrs = %+v, want %+v", oa, want)
	}
	buf := make([]byte, len(data)+10)
	n, err := io.ReadFull(rc, buf)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != len(data) || !bytes.Equal(buf[:n], data) {
		t.Fatalf("reading Open: n=%d err=%v", n, err)
	}
}

func testDefaultMediaType(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte("opaque bytes")
	a := put(t, s, "acme", data, "")
	if a.MediaType != "application/octet-stream" {
		t.Fatalf("Put media type = %q, want application/octet-stream", a.MediaType)
	}
	mustRead(t, s, a.Ref, data, "application/octet-stream")
}

func testIdempotentPut(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte("same bytes twice")
	a1 := put(t, s, "acme", data, "text/plain")
	a2 := put(t, s, "acme", data, "text/plain")
	if a1 != a2 {
		t.Fatalf("second Put = %+v, want %+v", a2, a1)
	}
	// The first writer's media type stays: a ref must describe one object, not
	// whatever the latest writer claimed.
	a3 := put(t, s, "acme", data, "application/x-other")
	if a3 != a1 {
		t.Fatalf("Put with another media type = %+v, want the stored %+v", a3, a1)
	}
	mustRead(t, s, a1.Ref, data, "text/plain")
}

func testTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte("shared submission")
	a := put(t, s, "tenant-a", data, "text/plain")
	refB := blob.Ref{Tenant: "tenant-b", SHA256: a.Ref.SHA256}

	// Knowing a digest must not let tenant B read tenant A's object.
	if _, err := s.Stat(t.Context(), refB); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat(%s) before B stored it: %v, want ErrNotFound", refB, err)
	}
	if rc, _, err := s.Open(t.Context(), refB); !errors.Is(err, blob.ErrNotFound) {
		if rc != nil {
			rc.Close()
		}
		t.Fatalf("Open(%s) before B stored it: %v, want ErrNotFound", refB, err)
	}

	b := put(t, s, "tenant-b", data, "application/x-b")
	if b.Ref != refB {
		t.Fatalf("B's ref = %s, want %s", b.Ref, refB)
	}
	if a.Ref == b.Ref || a.Ref.Key() == b.Ref.Key() {
		t.Fatalf("same bytes under two tenants gave one ref %s", a.Ref)
	}
	mustRead(t, s, a.Ref, data, "text/plain")
	mustRead(t, s, b.Ref, data, "application/x-b")
}

func testNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	ref := blob.Ref{Tenant: "acme", SHA256: sum([]byte("never stored"))}
	_, err := s.Stat(t.Context(), ref)
	wantErr(t, "Stat of a missing ref", err, blob.ErrNotFound)
	rc, _, err := s.Open(t.Context(), ref)
	if rc != nil {
		rc.Close()
	}
	wantErr(t, "Open of a missing ref", err, blob.ErrNotFound)
	_, _, err = blob.ReadAll(t.Context(), s, ref)
	wantErr(t, "ReadAll of a missing ref", err, blob.ErrNotFound)

	// A tenant that has stored something still misses other digests.
	put(t, s, "acme", []byte("something else"), "")
	_, err = s.Stat(t.Context(), ref)
	wantErr(t, "Stat of a missing ref in a used tenant", err, blob.ErrNotFound)
}

func testExpectedSHA256(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte("what the client sent")
	claimed := sum([]byte("what the client claimed"))
	_, err := s.Put(t.Context(), "acme", bytes.NewReader(data), blob.PutOptions{ExpectedSHA256: claimed})
	wantErr(t, "Put with a wrong ExpectedSHA256", err, blob.ErrDigestMismatch)
	for _, ref := range []blob.Ref{{Tenant: "acme", SHA256: sum(data)}, {Tenant: "acme", SHA256: claimed}} {
		_, err := s.Stat(t.Context(), ref)
		wantErr(t, "Stat after a rejected Put", err, blob.ErrNotFound)
	}

	// The right digest, in either case, is accepted.
	a, err := s.Put(t.Context(), "acme", bytes.NewReader(data), blob.PutOptions{ExpectedSHA256: strings.ToUpper(sum(data))})
	if err != nil {
		t.Fatalf("Put with the right ExpectedSHA256: %v", err)
	}
	if a.Ref.SHA256 != sum(data) {
		t.Fatalf("Put ref = %s, want sha256:%s", a.Ref, sum(data))
	}
	mustRead(t, s, a.Ref, data, "application/octet-stream")

	// A malformed expectation can never match, so it is a caller bug, not a mismatch.
	_, err = s.Put(t.Context(), "acme", bytes.NewReader(data), blob.PutOptions{ExpectedSHA256: "abc"})
	wantErr(t, "Put with a malformed ExpectedSHA256", err, blob.ErrInvalidRef)
}

// endless yields zero bytes forever and counts them, to show Put stops reading.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.n += int64(len(p))
	return len(p), nil
}

func testSizeLimit(t *testing.T, h Harness) {
	s := h.New(t)
	exact := bytes.Repeat([]byte{'x'}, int(h.MaxSize))
	a := put(t, s, "acme", exact, "")
	if a.Size != h.MaxSize {
		t.Fatalf("Put of exactly MaxSize: size %d, want %d", a.Size, h.MaxSize)
	}

	over := append(exact, 'x')
	_, err := s.Put(t.Context(), "acme", bytes.NewReader(over), blob.PutOptions{})
	wantErr(t, "Put of MaxSize+1 bytes", err, blob.ErrTooLarge)
	_, err = s.Stat(t.Context(), blob.Ref{Tenant: "acme", SHA256: sum(over)})
	wantErr(t, "Stat after a too-large Put", err, blob.ErrNotFound)

	src := &endless{}
	_, err = s.Put(t.Context(), "acme", src, blob.PutOptions{})
	wantErr(t, "Put of an endless body", err, blob.ErrTooLarge)
	// Reading in chunks may overshoot MaxSize+1 by one buffer, but not by much.
	if src.n > h.MaxSize+1<<20 {
		t.Fatalf("Put read %d bytes of an endless body with MaxSize %d", src.n, h.MaxSize)
	}
}

func testCorrupted(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte("the submission as it was judged")
	a := put(t, s, "acme", data, "text/plain")
	h.Corrupt(t, s, a.Ref)

	_, _, err := blob.ReadAll(t.Context(), s, a.Ref)
	wantErr(t, "ReadAll of a corrupted object", err, blob.ErrDigestMismatch)
	if !strings.Contains(err.Error(), a.Ref.String()) {
		t.Errorf("mismatch error %q does not name %s", err, a.Ref)
	}

	// Streaming: the bytes may come out, but the stream must not end in io.EOF.
	rc, _, err := s.Open(t.Context(), a.Ref)
	if err != nil {
		// Reporting the mismatch at Open is also acceptable.
		wantErr(t, "Open of a corrupted object", err, blob.ErrDigestMismatch)
		return
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	wantErr(t, "reading a corrupted object", err, blob.ErrDigestMismatch)
	// The verdict is sticky.
	_, err = rc.Read(make([]byte, 1))
	wantErr(t, "reading a corrupted object again", err, blob.ErrDigestMismatch)
}

func testInvalidRef(t *testing.T, h Harness) {
	s := h.New(t)
	good := sum([]byte("x"))
	badTenants := []string{"", "Acme", "-acme", "a/b", "..", "../etc", "acme ", "a.b",
		strings.Repeat("a", 64), "ünïcode"}
	for _, tenant := range badTenants {
		_, err := s.Put(t.Context(), tenant, strings.NewReader("x"), blob.PutOptions{})
		wantErr(t, fmt.Sprintf("Put(tenant %q)", tenant), err, blob.ErrInvalidRef)
		ref := blob.Ref{Tenant: tenant, SHA256: good}
		_, err = s.Stat(t.Context(), ref)
		wantErr(t, fmt.Sprintf("Stat(tenant %q)", tenant), err, blob.ErrInvalidRef)
		rc, _, err := s.Open(t.Context(), ref)
		if rc != nil {
			rc.Close()
		}
		wantErr(t, fmt.Sprintf("Open(tenant %q)", tenant), err, blob.ErrInvalidRef)
	}
	badDigests := []string{"", "abc", strings.ToUpper(good), good[:63], good + "0",
		strings.Repeat("g", 64), "../../../../" + good[12:], good[:62] + "/x"}
	for _, d := range badDigests {
		ref := blob.Ref{Tenant: "acme", SHA256: d}
		_, err := s.Stat(t.Context(), ref)
		wantErr(t, fmt.Sprintf("Stat(sha256 %q)", d), err, blob.ErrInvalidRef)
		rc, _, err := s.Open(t.Context(), ref)
		if rc != nil {
			rc.Close()
		}
		wantErr(t, fmt.Sprintf("Open(sha256 %q)", d), err, blob.ErrInvalidRef)
	}
	// The longest valid tenant works.
	put(t, s, strings.Repeat("a", 63), []byte("x"), "")
}

func testEmpty(t *testing.T, h Harness) {
	s := h.New(t)
	a := put(t, s, "acme", nil, "text/plain")
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if a.Ref.SHA256 != emptySHA || a.Size != 0 {
		t.Fatalf("Put of nothing = %+v", a)
	}
	mustRead(t, s, a.Ref, []byte{}, "text/plain")
}

func testLarge(t *testing.T, h Harness) {
	s := h.New(t)
	data := randomBytes(t, 5<<20)
	// A reader without WriteTo or Seek, as an HTTP body would be.
	a, err := s.Put(t.Context(), "acme", struct{ io.Reader }{bytes.NewReader(data)}, blob.PutOptions{MediaType: "application/x-tar"})
	if err != nil {
		t.Fatalf("Put of 5 MiB: %v", err)
	}
	if a.Size != int64(len(data)) || a.Ref.SHA256 != sum(data) {
		t.Fatalf("Put of 5 MiB = %+v", a)
	}
	mustRead(t, s, a.Ref, data, "application/x-tar")
}

func testConcurrentSame(t *testing.T, h Harness) {
	s := h.New(t)
	data := randomBytes(t, 256<<10)
	const n = 16
	var wg sync.WaitGroup
	attrs := make([]blob.Attrs, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			attrs[i], errs[i] = s.Put(t.Context(), "acme", bytes.NewReader(data), blob.PutOptions{MediaType: "text/plain"})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent Put %d: %v", i, errs[i])
		}
		if attrs[i] != attrs[0] {
			t.Fatalf("concurrent Put %d = %+v, want %+v", i, attrs[i], attrs[0])
		}
	}
	mustRead(t, s, attrs[0].Ref, data, "text/plain")
}

func testConcurrentDifferent(t *testing.T, h Harness) {
	s := h.New(t)
	const n = 16
	datas := make([][]byte, n)
	for i := range n {
		datas[i] = randomBytes(t, 64<<10+i)
	}
	var wg sync.WaitGroup
	attrs := make([]blob.Attrs, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			tenant := []string{"acme", "globex"}[i%2]
			attrs[i], errs[i] = s.Put(t.Context(), tenant, bytes.NewReader(datas[i]), blob.PutOptions{MediaType: fmt.Sprintf("application/x-%d", i)})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent Put %d: %v", i, errs[i])
		}
		mustRead(t, s, attrs[i].Ref, datas[i], fmt.Sprintf("application/x-%d", i))
	}
}

// cancelAfter cancels its context once it has handed out some bytes, like a client
// that disconnects mid-upload.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
	}
	n, err := c.r.Read(p[:min(len(p), max(c.n, 1))])
	c.n -= n
	return n, err
}

func testCancelled(t *testing.T, h Harness) {
	s := h.New(t)
	data := []byte("stored before cancel")
	a := put(t, s, "acme", data, "")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Put(ctx, "acme", strings.NewReader("after cancel"), blob.PutOptions{})
	wantErr(t, "Put with a cancelled context", err, context.Canceled)
	_, err = s.Stat(ctx, blob.Ref{Tenant: "acme", SHA256: sum([]byte("after cancel"))})
	if err == nil {
		t.Fatal("Stat with a cancelled context succeeded")
	}
	_, err = s.Stat(t.Context(), blob.Ref{Tenant: "acme", SHA256: sum([]byte("after cancel"))})
	wantErr(t, "Stat after a cancelled Put", err, blob.ErrNotFound)
	_, err = s.Stat(ctx, a.Ref)
	wantErr(t, "Stat with a cancelled context", err, context.Canceled)
	rc, _, err := s.Open(ctx, a.Ref)
	if err == nil {
		// A lazy driver may only notice when reading.
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	wantErr(t, "Open with a cancelled context", err, context.Canceled)

	// Cancelled mid-upload: nothing is stored.
	body := randomBytes(t, 1<<20)
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	_, err = s.Put(ctx2, "acme", &cancelAfter{r: bytes.NewReader(body), n: 100 << 10, cancel: cancel2}, blob.PutOptions{})
	wantErr(t, "Put cancelled mid-body", err, context.Canceled)
	_, err = s.Stat(t.Context(), blob.Ref{Tenant: "acme", SHA256: sum(body)})
	wantErr(t, "Stat after a Put cancelled mid-body", err, blob.ErrNotFound)
}
