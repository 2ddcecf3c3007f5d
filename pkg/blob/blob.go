// Package blob stores tribunal's artifacts content-addressed under a tenant.
//
// Every object lives at "<tenant>/sha256/<hex>". The digest is computed on write and
// re-verified on every read, so a corrupted or swapped object is reported instead of
// being judged. The media type travels with the object because sensors and judges
// dispatch on it.
//
// Two drivers implement Store: "file" (a directory; the all-in-one default) and "s3"
// (minio-go; MinIO, AWS S3 or any S3-compatible server). Both are exercised by the one
// conformance suite in package blobtest.
package blob

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/ident"
)

// DefaultMaxSize is the largest object a Store accepts unless configured otherwise. It
// bounds what the system itself writes: an ab manifest is about 1.1 KiB a comparison of
// indented JSON, so a batch of 1,000,000 ACs (the most one holds) writes one of about
// 1.1 GiB, more with long judge answers. The artifacts a batch submits are held to the
// smaller ArtifactMaxSize where they enter.
const DefaultMaxSize int64 = 4 << 30

// ArtifactMaxSize is the default limit on one submitted or fetched artifact.
const ArtifactMaxSize int64 = 20 << 20

var (
	// ErrNotFound is returned when no object exists for a Ref.
	ErrNotFound = errclass.New(errclass.NotFound, "blob: not found")
	// ErrDigestMismatch is returned when stored bytes no longer hash to their key, or
	// when a caller-supplied expected digest does not match what was written.
	ErrDigestMismatch = errclass.New(errclass.Refused, "blob: digest mismatch")
	// ErrTooLarge is returned when an object exceeds the store's size limit.
	ErrTooLarge = errclass.New(errclass.Refused, "blob: object too large")
	// ErrInvalidRef is returned for a malformed tenant or digest.
	ErrInvalidRef = errclass.New(errclass.Refused, "blob: invalid reference")
)

// Ref names one object: the tenant that owns it and the hex SHA-256 of its bytes.
type Ref struct {
	Tenant string `json:"tenant" msgpack:"tenant"`
	SHA256 string `json:"sha256" msgpack:"sha256"`
}

// Key is the object's path inside a store: "<tenant>/sha256/<hex>".
func (r Ref) Key() string { return r.Tenant + "/sha256/" + r.SHA256 }

// String renders the ref as "<tenant>/sha256:<hex>", the form used in logs and outputs.
func (r Ref) String() string { return r.Tenant + "/sha256:" + r.SHA256 }

// Validate reports whether the ref's tenant and digest are well formed.
func (r Ref) Validate() error {
	if !ident.Tenant(r.Tenant) {
		return fmt.Errorf("%w: tenant %q", ErrInvalidRef, r.Tenant)
	}
	if !ident.HexDigest(r.SHA256) {
		return fmt.Errorf("%w: sha256 %q", ErrInvalidRef, r.SHA256)
	}
	return nil
}

// Attrs describe a stored object.
type Attrs struct {
	Ref       Ref
	Size      int64
	MediaType string
}

// PutOptions tune a write.
type PutOptions struct {
	// MediaType is stored with the object; "application/octet-stream" when empty.
	MediaType string
	// ExpectedSHA256, when set, must match the written bytes or Put fails with
	// ErrDigestMismatch and stores nothing.
	ExpectedSHA256 string
	// Deferred lets Put return before the bytes are durable; the caller makes them
	// durable with Sync before it publishes anything that names them. A client storing a
	// batch's artifacts then pays one flush per chunk instead of one per object (on the
	// development machine's disk, 5 of the 6 seconds a 10,000-AC submission took). A
	// store whose Put is durable on return (s3, or any store without Sync) ignores it.
	Deferred bool
}

// Syncer is a Store that can defer durability (PutOptions.Deferred). A Store that wraps
// another and forwards Put must forward Sync too, or deferred objects stay unsynced until
// the inner store closes.
type Syncer interface {
	// Sync makes every object stored so far durable.
	Sync(ctx context.Context) error
}

// Sync makes the deferred Puts to s durable. For a store that defers nothing it does
// nothing: such a store's Put was durable already.
func Sync(ctx context.Context, s Store) error {
	if sy, ok := s.(Syncer); ok {
		return sy.Sync(ctx)
	}
	return nil
}

// Usager is a Store that can say how many bytes a tenant stores: the ingress holds each
// team to a quota of them.
type Usager interface {
	// Usage is what tenant's objects take in the store, in bytes (on disk, for a store
	// on one).
	Usage(ctx context.Context, tenant string) (int64, error)
}

// ErrUsageUnknown is Usage of a store that cannot count a tenant's bytes.
var ErrUsageUnknown = errclass.New(errclass.Unavailable, "the blob store cannot count a tenant's bytes")

// Usage is what tenant's objects take in s (Usager), or ErrUsageUnknown.
func Usage(ctx context.Context, s Store, tenant string) (int64, error) {
	u, ok := s.(Usager)
	if !ok {
		return 0, ErrUsageUnknown
	}
	return u.Usage(ctx, tenant)
}

// Store is the artifact storage every service uses. Implementations must be safe for
// concurrent use.
type Store interface {
	// Put reads r to its end, stores it under tenant by content, and returns its ref.
	// Writing bytes that already exist is a cheap no-op that returns the same ref.
	Put(ctx context.Context, tenant string, r io.Reader, opts PutOptions) (Attrs, error)
	// Open returns a reader over the object's bytes. The reader verifies the digest as
	// it is consumed and returns ErrDigestMismatch from Read at the end instead of
	// io.EOF when the bytes do not match. A missing object is ErrNotFound.
	Open(ctx context.Context, ref Ref) (io.ReadCloser, Attrs, error)
	// Stat returns an object's attributes without reading it, or ErrNotFound.
	Stat(ctx context.Context, ref Ref) (Attrs, error)
	// Close releases the driver's resources.
	Close() error
}

// ReadAll opens ref and returns its verified bytes.
func ReadAll(ctx context.Context, s Store, ref Ref) ([]byte, Attrs, error) {
	rc, attrs, err := s.Open(ctx, ref)
	if err != nil {
		return nil, Attrs{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, Attrs{}, fmt.Errorf("read %s: %w", ref, err)
	}
	return data, attrs, nil
}

// PutBytes stores data under tenant.
func PutBytes(ctx context.Context, s Store, tenant string, data []byte, mediaType string) (Attrs, error) {
	return s.Put(ctx, tenant, bytes.NewReader(data), PutOptions{MediaType: mediaType})
}
