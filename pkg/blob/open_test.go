package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// fakeStore serves one object; it stands in for a driver in registry tests.
type fakeStore struct {
	data  []byte
	attrs blob.Attrs
	url   *url.URL
}

func (f fakeStore) Put(context.Context, string, io.Reader, blob.PutOptions) (blob.Attrs, error) {
	return blob.Attrs{}, errors.New("read only")
}

func (f fakeStore) Open(_ context.Context, ref blob.Ref) (io.ReadCloser, blob.Attrs, error) {
	return blob.NewVerifyingReader(io.NopCloser(bytes.NewReader(f.data)), f.attrs), f.attrs, nil
}

func (f fakeStore) Stat(context.Context, blob.Ref) (blob.Attrs, error) { return f.attrs, nil }
func (f fakeStore) Close() error                                       { return nil }

func init() {
	blob.Register("fake", func(_ context.Context, u *url.URL) (blob.Store, error) {
		if u.Query().Get("fail") != "" {
			return nil, errors.New("fake: query parameter fail: told to")
		}
		return fakeStore{url: u}, nil
	})
}

func TestOpenURL(t *testing.T) {
	t.Parallel()
	s, err := blob.OpenURL(t.Context(), "fake://bucket/x?a=1")
	if err != nil {
		t.Fatal(err)
	}
	if u := s.(fakeStore).url; u.Host != "bucket" || u.Path != "/x" || u.Query().Get("a") != "1" {
		t.Fatalf("opener got %v", u)
	}
	if _, err := blob.OpenURL(t.Context(), "FAKE://bucket"); err != nil {
		t.Fatalf("scheme should be case-insensitive: %v", err)
	}
}

func TestOpenURLErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url     string
		want    []string
		mustNot string
	}{
		{"", []string{"empty"}, ""},
		{"nope://x", []string{`unknown scheme "nope"`, "fake"}, ""},
		// The file driver is not imported by this test: a bare path says so.
		{"/var/lib/blobs", []string{`"file"`, "imported"}, ""},
		{"fake://ak:hunter2@bucket?fail=1", []string{"fake://ak:xxxxx@bucket", "query parameter fail"}, "hunter2"},
		{"fake://bucket?session_token=hunter2&fail=1", []string{"session_token=xxxxx"}, "hunter2"},
		{"fake://ak:hunter2@bucket/%zz?x=1", []string{"parse URL", "xxxxx"}, "hunter2"},
	}
	for _, c := range cases {
		_, err := blob.OpenURL(t.Context(), c.url)
		if err == nil {
			t.Errorf("OpenURL(%q) succeeded", c.url)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("OpenURL(%q) = %q, want it to mention %s", c.url, err, w)
			}
		}
		if c.mustNot != "" && strings.Contains(err.Error(), c.mustNot) {
			t.Errorf("OpenURL(%q) = %q leaks %q", c.url, err, c.mustNot)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	t.Parallel()
	opener := func(context.Context, *url.URL) (blob.Store, error) { return nil, nil }
	for name, f := range map[string]func(){
		"duplicate":  func() { blob.Register("fake", opener) },
		"nil":        func() { blob.Register("other", nil) },
		"upper":      func() { blob.Register("Other", opener) },
		"one letter": func() { blob.Register("c", opener) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestRefAndTenantValidation(t *testing.T) {
	t.Parallel()
	if err := blob.ValidateTenant("acme-1_x"); err != nil {
		t.Fatal(err)
	}
	if err := blob.ValidateTenant("../x"); !errors.Is(err, blob.ErrInvalidRef) {
		t.Fatalf("ValidateTenant(../x) = %v", err)
	}
	if _, _, err := blob.NormalizePut("acme", blob.PutOptions{ExpectedSHA256: strings.Repeat("A", 64)}); err != nil {
		t.Fatalf("upper-case expected digest: %v", err)
	}
}

func TestDigestCopy(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	n, sum, err := blob.DigestCopy(t.Context(), &buf, strings.NewReader("abc"), 3)
	if err != nil || n != 3 || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("DigestCopy = %d %s %v", n, sum, err)
	}
	_, _, err = blob.DigestCopy(t.Context(), io.Discard, strings.NewReader("abcd"), 3)
	if !errors.Is(err, blob.ErrTooLarge) {
		t.Fatalf("DigestCopy over limit = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := blob.DigestCopy(ctx, io.Discard, strings.NewReader("abc"), 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("DigestCopy cancelled = %v", err)
	}
}
