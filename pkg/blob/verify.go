package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// NewVerifyingReader wraps the raw bytes of the object described by attrs. Storage can
// rot or be overwritten behind the driver's back, and a judge must never score bytes
// that are not the ones submitted, so the reader hashes everything it passes on and,
// instead of io.EOF, returns ErrDigestMismatch when the bytes do not hash to
// attrs.Ref.SHA256 or their count differs from attrs.Size. Too many bytes fail as soon
// as they are seen; a digest mismatch can only be known at the end. Once it has
// failed, the reader keeps returning the same error.
//
// Callers that need all-or-nothing semantics must discard what they read if the final
// Read does not return io.EOF; blob.ReadAll does that.
func NewVerifyingReader(rc io.ReadCloser, attrs Attrs) io.ReadCloser {
	return &verifyingReader{rc: rc, attrs: attrs, h: sha256.New()}
}

type verifyingReader struct {
	rc    io.ReadCloser
	attrs Attrs
	h     hash.Hash
	n     int64
	err   error // sticky: io.EOF after a verified end, or the failure
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.attrs.Size < 0 {
		v.err = fmt.Errorf("blob: cannot verify %s: size %d was not recorded", v.attrs.Ref, v.attrs.Size)
		return 0, v.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Never hand out bytes past the recorded size: read at most one byte beyond it,
	// just to learn that the stored object is longer than it should be.
	if rem := v.attrs.Size - v.n + 1; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.attrs.Size {
		v.err = fmt.Errorf("%w: %s has more than its recorded %d bytes", ErrDigestMismatch, v.attrs.Ref, v.attrs.Size)
		return n - int(v.n-v.attrs.Size), v.err
	}
	switch {
	case errors.Is(err, io.EOF):
		v.err = v.finish()
		return n, v.err
	case err != nil:
		// Transport errors are not verdicts about the content: pass them through so
		// callers can tell "retry" from "corrupt", but stop reading after them.
		v.err = err
		return n, err
	}
	return n, nil
}

// finish decides the verdict at end of stream.
func (v *verifyingReader) finish() error {
	if v.n != v.attrs.Size {
		return fmt.Errorf("%w: %s ended after %d of its recorded %d bytes", ErrDigestMismatch, v.attrs.Ref, v.n, v.attrs.Size)
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.attrs.Ref.SHA256 {
		return fmt.Errorf("%w: %s read back as sha256:%s", ErrDigestMismatch, v.attrs.Ref, got)
	}
	return io.EOF
}

func (v *verifyingReader) Close() error { return v.rc.Close() }
