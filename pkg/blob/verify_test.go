package blob_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

func attrsOf(data []byte) blob.Attrs {
	s := sha256.Sum256(data)
	return blob.Attrs{Ref: blob.Ref{Tenant: "acme", SHA256: hex.EncodeToString(s[:])}, Size: int64(len(data))}
}

func TestVerifyingReader(t *testing.T) {
	t.Parallel()
	good := []byte("the bytes that were judged")
	a := attrsOf(good)
	flipped := bytes.Clone(good)
	flipped[3] ^= 1

	cases := []struct {
		name    string
		stored  []byte
		attrs   blob.Attrs
		wantErr error
		// wantMax bounds what the reader may hand out.
		wantMax int
	}{
		{"intact", good, a, nil, len(good)},
		{"empty", nil, attrsOf(nil), nil, 0},
		{"flipped byte", flipped, a, blob.ErrDigestMismatch, len(good)},
		{"truncated", good[:10], a, blob.ErrDigestMismatch, 10},
		{"longer", append(bytes.Clone(good), "extra"...), a, blob.ErrDigestMismatch, len(good)},
		{"unknown size", good, blob.Attrs{Ref: a.Ref, Size: -1}, nil, 0},
	}
	for _, c := range cases {
		for _, mode := range []string{"plain", "one byte", "data+EOF"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				var r io.Reader = bytes.NewReader(c.stored)
				switch mode {
				case "one byte":
					r = iotest.OneByteReader(r)
				case "data+EOF":
					r = iotest.DataErrReader(r)
				}
				vr := blob.NewVerifyingReader(io.NopCloser(r), c.attrs)
				got, err := io.ReadAll(vr)
				if c.name == "unknown size" {
					if err == nil {
						t.Fatal("reader with unknown size verified")
					}
					return
				}
				if c.wantErr == nil {
					if err != nil || !bytes.Equal(got, c.stored) {
						t.Fatalf("ReadAll = %q, %v", got, err)
					}
					if n, err := vr.Read(make([]byte, 4)); n != 0 || err != io.EOF {
						t.Fatalf("Read after EOF = %d, %v", n, err)
					}
					return
				}
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("ReadAll err = %v, want %v", err, c.wantErr)
				}
				if len(got) > c.wantMax {
					t.Fatalf("reader handed out %d bytes, more than %d", len(got), c.wantMax)
				}
				if _, err2 := vr.Read(make([]byte, 4)); !errors.Is(err2, c.wantErr) {
					t.Fatalf("error not sticky: %v", err2)
				}
			})
		}
	}
}

func TestVerifyingReaderPassesTransportErrors(t *testing.T) {
	t.Parallel()
	good := []byte("abcdefgh")
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(good[:4]), iotest.ErrReader(boom))
	_, err := io.ReadAll(blob.NewVerifyingReader(io.NopCloser(r), attrsOf(good)))
	if !errors.Is(err, boom) || errors.Is(err, blob.ErrDigestMismatch) {
		t.Fatalf("err = %v, want the transport error and no mismatch verdict", err)
	}
}

func TestReadAllVerifies(t *testing.T) {
	t.Parallel()
	// blob.ReadAll must not return bytes that failed verification.
	good := []byte("payload")
	s := fakeStore{data: []byte("PAYLOAD"), attrs: attrsOf(good)}
	data, _, err := blob.ReadAll(t.Context(), s, s.attrs.Ref)
	if !errors.Is(err, blob.ErrDigestMismatch) || data != nil {
		t.Fatalf("ReadAll = %q, %v", data, err)
	}
}
