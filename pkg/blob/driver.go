package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/tribunal-dev/tribunal/pkg/ident"
)

// Helpers for driver packages. They live here so that every driver enforces tenants,
// size limits and digests identically; a driver that drifted would pass its own tests
// and still disagree with the others about which objects exist.

// DefaultMediaType is stored when PutOptions.MediaType is empty.
const DefaultMediaType = "application/octet-stream"

// ValidateTenant reports whether tenant is well formed, wrapping ErrInvalidRef. Drivers
// check it before touching storage because the tenant becomes a path or key component.
func ValidateTenant(tenant string) error {
	if !ident.Tenant(tenant) {
		return fmt.Errorf("%w: tenant %q", ErrInvalidRef, tenant)
	}
	return nil
}

// NormalizePut validates the tenant and options of a Put before any byte is read, and
// returns the media type and expected digest to use. A malformed ExpectedSHA256 is
// ErrInvalidRef rather than a mismatch, since no content could ever satisfy it.
func NormalizePut(tenant string, opts PutOptions) (mediaType, expected string, err error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", "", err
	}
	mediaType = opts.MediaType
	if mediaType == "" {
		mediaType = DefaultMediaType
	}
	if opts.ExpectedSHA256 != "" {
		expected = strings.ToLower(opts.ExpectedSHA256)
		if !ident.HexDigest(expected) {
			return "", "", fmt.Errorf("%w: expected sha256 %q", ErrInvalidRef, opts.ExpectedSHA256)
		}
	}
	return mediaType, expected, nil
}

// CheckExpected returns ErrDigestMismatch when expected is set and differs from got.
func CheckExpected(tenant, expected, got string) error {
	if expected != "" && expected != got {
		return fmt.Errorf("%w: %s/sha256:%s was written but %s was expected",
			ErrDigestMismatch, tenant, got, expected)
	}
	return nil
}

// DigestCopy copies r to w while hashing it, and returns the byte count and the hex
// SHA-256. It reads at most max+1 bytes and then fails with ErrTooLarge, so a client
// streaming an endless body costs the server max bytes, not its disk or memory. The
// context is checked between reads because a cancelled request must stop a slow
// upload even when r itself ignores cancellation.
func DigestCopy(ctx context.Context, w io.Writer, r io.Reader, max int64) (int64, string, error) {
	if max < 0 {
		max = 0
	}
	h := sha256.New()
	src := io.LimitReader(ContextReader(ctx, r), max+1)
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	n, err := io.CopyBuffer(io.MultiWriter(w, h), src, *buf)
	if err != nil {
		return n, "", err
	}
	if n > max {
		return n, "", fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// copyBuffers are DigestCopy's buffers: a Put of a few hundred bytes allocating 32 KiB
// showed in the all-in-one mode's garbage collection.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ContextReader fails reads from r once ctx is done, so an abandoned request does not
// keep streaming a large object. Drivers wrap their readers in it.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return &ctxReader{ctx: ctx, r: r} }

// ctxReader is ContextReader's reader.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
