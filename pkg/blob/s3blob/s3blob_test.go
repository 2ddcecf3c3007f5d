package s3blob

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tribunal-dev/tribunal/internal/testutil/s3server"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/blobtest"
)

const testMaxSize = 6 << 20

func config(srv *s3server.Server, bucket string) Config {
	return Config{
		Endpoint:     srv.Endpoint,
		Bucket:       bucket,
		AccessKey:    srv.AccessKey,
		SecretKey:    srv.SecretKey,
		Region:       srv.Region,
		PathStyle:    true,
		Secure:       srv.Secure,
		MaxSize:      testMaxSize,
		CreateBucket: true,
	}
}

// newStore creates a store over a fresh bucket, removed again at cleanup so that an
// external server does not collect test buckets.
func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				_ = s.client.RemoveObject(ctx, s.bucket, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		if err := s.client.RemoveBucket(ctx, s.bucket); err != nil {
			t.Logf("remove bucket %s: %v", s.bucket, err)
		}
		s.Close()
	})
	return s
}

// corrupt flips one stored byte behind the driver's back, keeping the object's
// length, content type and metadata, as bit rot would.
func corrupt(t *testing.T, bs blob.Store, ref blob.Ref) {
	t.Helper()
	s := bs.(*Store)
	s3server.Rewrite(t, s.client, s.bucket, s.Key(ref), func(data []byte, contentType string) ([]byte, string) {
		if len(data) == 0 {
			t.Fatal("cannot corrupt an empty object in place")
		}
		data[len(data)/2] ^= 0xff
		return data, contentType
	})
}

func TestConformance(t *testing.T) {
	srv := s3server.Start(t)
	blobtest.Run(t, blobtest.Harness{
		MaxSize: testMaxSize,
		New: func(t *testing.T) blob.Store {
			return newStore(t, config(srv, s3server.Bucket(t)))
		},
		Corrupt: corrupt,
	})
}

func TestConformanceWithPrefix(t *testing.T) {
	srv := s3server.Start(t)
	blobtest.Run(t, blobtest.Harness{
		MaxSize: testMaxSize,
		New: func(t *testing.T) blob.Store {
			cfg := config(srv, s3server.Bucket(t))
			cfg.Prefix = "deploy-1"
			return newStore(t, cfg)
		},
		Corrupt: corrupt,
	})
}

func TestObjectLayout(t *testing.T) {
	srv := s3server.Start(t)
	cfg := config(srv, s3server.Bucket(t))
	cfg.Prefix = "/env/prod"
	s := newStore(t, cfg)
	a, err := blob.PutBytes(t.Context(), s, "acme", []byte("layout"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	wantKey := "env/prod/acme/sha256/" + a.Ref.SHA256
	if s.Key(a.Ref) != wantKey {
		t.Fatalf("Key = %q, want %q", s.Key(a.Ref), wantKey)
	}
	info, err := s.client.StatObject(t.Context(), s.bucket, wantKey, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.ContentType != "text/plain" || userMeta(info, metaSHA256) != a.Ref.SHA256 || info.Size != 6 {
		t.Fatalf("stored object: type %q meta %v size %d", info.ContentType, info.UserMetadata, info.Size)
	}
}

// An object whose metadata names another digest was moved to the wrong key.
func TestOpenDetectsMislabelledObject(t *testing.T) {
	srv := s3server.Start(t)
	s := newStore(t, config(srv, s3server.Bucket(t)))
	a, err := blob.PutBytes(t.Context(), s, "acme", []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.PutBytes(t.Context(), s, "acme", []byte("two"), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.CopyObject(t.Context(),
		minio.CopyDestOptions{Bucket: s.bucket, Object: s.Key(b.Ref)},
		minio.CopySrcOptions{Bucket: s.bucket, Object: s.Key(a.Ref)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := blob.ReadAll(t.Context(), s, b.Ref); !errors.Is(err, blob.ErrDigestMismatch) {
		t.Fatalf("ReadAll of a swapped object: %v, want ErrDigestMismatch", err)
	}
}

func TestMissingBucketIsNotNotFound(t *testing.T) {
	srv := s3server.Start(t)
	cfg := config(srv, s3server.Bucket(t))
	cfg.CreateBucket = false
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = blob.PutBytes(t.Context(), s, "acme", []byte("x"), "")
	if err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Put into a missing bucket: %v, want a non-NotFound error", err)
	}
	if !strings.Contains(err.Error(), cfg.Bucket) {
		t.Fatalf("error %q does not name the bucket", err)
	}
}

func TestOpenURL(t *testing.T) {
	srv := s3server.Start(t)
	bucket := s3server.Bucket(t)
	st, err := blob.OpenURL(t.Context(), srv.URL(bucket)+"&create_bucket=true&max_size=1024&prefix=p")
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*Store)
	t.Cleanup(func() {
		for obj := range s.client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
			_ = s.client.RemoveObject(context.Background(), bucket, obj.Key, minio.RemoveObjectOptions{})
		}
		_ = s.client.RemoveBucket(context.Background(), bucket)
		s.Close()
	})
	if s.Bucket() != bucket || s.MaxSize() != 1024 || s.prefix != "p/" {
		t.Fatalf("OpenURL gave bucket %s max %d prefix %q", s.Bucket(), s.MaxSize(), s.prefix)
	}
	a, err := blob.PutBytes(t.Context(), s, "acme", []byte("via url"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := blob.ReadAll(t.Context(), s, a.Ref); err != nil || string(got) != "via url" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}

	// Wrong credentials fail with an error that names the URL but not the secret.
	u, _ := url.Parse(srv.URL(bucket))
	u.User = url.UserPassword(srv.AccessKey, "wrong-secret-value")
	bad, err := blob.OpenURL(t.Context(), u.String()+"&create_bucket=true")
	if err == nil {
		bad.Close()
		t.Fatal("OpenURL with a wrong secret succeeded")
	}
	if strings.Contains(err.Error(), "wrong-secret-value") || !strings.Contains(err.Error(), bucket) {
		t.Fatalf("error %q leaks the secret or omits the bucket", err)
	}
}

func TestParseURL(t *testing.T) {
	t.Setenv("TRIBUNAL_S3_ACCESS_KEY", "")
	t.Setenv("TRIBUNAL_S3_SECRET_KEY", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("TRIBUNAL_S3_SESSION_TOKEN", "")
	parse := func(raw string) (Config, error) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return ParseURL(u)
	}

	cfg, err := parse("s3://ak:sk%2F1@arts?endpoint=127.0.0.1:9000&region=eu-west-1&path_style=true&secure=false&prefix=x&create_bucket=1&max_size=10&max_retries=2")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Endpoint: "127.0.0.1:9000", Bucket: "arts", AccessKey: "ak", SecretKey: "sk/1", Region: "eu-west-1",
		PathStyle: true, Secure: false, Prefix: "x", MaxSize: 10, CreateBucket: true, MaxRetries: 2}
	if cfg != want {
		t.Fatalf("ParseURL = %+v, want %+v", cfg, want)
	}

	if _, err := parse("s3://arts"); err == nil || !strings.Contains(err.Error(), "TRIBUNAL_S3_ACCESS_KEY") {
		t.Fatalf("no credentials: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "aws-ak")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-sk")
	t.Setenv("AWS_SESSION_TOKEN", "aws-tok")
	cfg, err = parse("s3://arts")
	if err != nil || cfg.AccessKey != "aws-ak" || cfg.SecretKey != "aws-sk" || cfg.SessionToken != "aws-tok" || !cfg.Secure {
		t.Fatalf("AWS env credentials: %+v, %v", cfg, err)
	}
	t.Setenv("TRIBUNAL_S3_ACCESS_KEY", "tr-ak")
	t.Setenv("TRIBUNAL_S3_SECRET_KEY", "tr-sk")
	cfg, err = parse("s3://arts")
	if err != nil || cfg.AccessKey != "tr-ak" || cfg.SecretKey != "tr-sk" {
		t.Fatalf("TRIBUNAL env credentials should win: %+v, %v", cfg, err)
	}
	t.Setenv("TRIBUNAL_S3_SECRET_KEY", "")
	if _, err := parse("s3://arts"); err == nil || !strings.Contains(err.Error(), "TRIBUNAL_S3_SECRET_KEY") {
		t.Fatalf("half-set env credentials: %v", err)
	}

	for raw, field := range map[string]string{
		"s3://ak:sk@arts?path_style=yes-please": "path_style",
		"s3://ak:sk@arts?secure=2":              "secure",
		"s3://ak:sk@arts?max_size=0":            "max_size",
		"s3://ak:sk@arts?max_retries=x":         "max_retries",
		"s3://ak:sk@arts?endpiont=x":            `"endpiont"`,
		"s3://ak:sk@arts/some/path":             "prefix",
		"s3://ak:sk@?endpoint=x":                "bucket",
		"s3://ak@arts":                          "userinfo",
	} {
		if _, err := parse(raw); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("ParseURL(%q) = %v, want an error naming %s", raw, err, field)
		}
	}
}

// A down server must fail calls within the caller's deadline, not hang, and the store
// must work again once the server is back.
func TestServerDown(t *testing.T) {
	srv := s3server.Start(t)
	s := newStore(t, config(srv, s3server.Bucket(t)))
	a, err := blob.PutBytes(t.Context(), s, "acme", []byte("before the outage"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}

	srv.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Stat(ctx, a.Ref)
	if err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat with the server down: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Stat took %s with a 2s deadline", d)
	}

	// Without a deadline, minio-go's bounded retries still give up on their own.
	start = time.Now()
	_, err = blob.PutBytes(context.Background(), s, "acme", []byte("during the outage"), "")
	if err == nil {
		t.Fatal("Put with the server down succeeded")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Put took %s to fail with the server down", d)
	}
	t.Logf("Put with no deadline failed after %s: %v", time.Since(start).Round(time.Millisecond), err)

	srv.Restart()
	got, _, err := blob.ReadAll(t.Context(), s, a.Ref)
	if err != nil || string(got) != "before the outage" {
		t.Fatalf("ReadAll after restart = %q, %v", got, err)
	}
}

// Put signs the payload with its SHA-256; the server must refuse bytes that do not
// match it, which is what protects uploads from corruption in transit.
func TestServerChecksSignedDigest(t *testing.T) {
	srv := s3server.Start(t)
	s := newStore(t, config(srv, s3server.Bucket(t)))
	data := []byte("hello")
	wrong := strings.Repeat("0", 64)
	_, err := s.core.PutObject(t.Context(), s.bucket, "x", bytes.NewReader(data), int64(len(data)), "", wrong,
		minio.PutObjectOptions{DisableContentSha256: true, DisableMultipart: true})
	if errCode(err) != "XAmzContentSHA256Mismatch" {
		t.Fatalf("upload with a wrong signed digest: %v (code %q), want XAmzContentSHA256Mismatch", err, errCode(err))
	}
}
