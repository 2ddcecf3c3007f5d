// Package s3blob is the "s3" blob driver, built on minio-go: it works with AWS S3,
// MinIO, versitygw and other S3-compatible servers. Objects live at
// "<prefix><tenant>/sha256/<hex>" with the media type as Content-Type and the digest
// repeated in the "sha256" user metadata, so operators can audit a bucket with any
// S3 tool.
//
// Import it for its side effect to make "s3" URLs work with blob.OpenURL:
//
//	import _ "github.com/tribunal-dev/tribunal/pkg/blob/s3blob"
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
)

// Scheme is the URL scheme this driver registers.
const Scheme = "s3"

func init() { blob.Register(Scheme, openURL) }

// DefaultRegion is used when Config.Region is empty. A region is always configured
// because without one minio-go asks the server with GetBucketLocation first, which
// costs a round trip and fails on servers and policies that do not allow it.
const DefaultRegion = "us-east-1"

// metaSHA256 is the user metadata key holding the hex digest.
const metaSHA256 = "sha256"

// Timeouts of the HTTP transport. minio-go retries failed requests itself (with
// jittered backoff, up to MaxRetries times), so each attempt must give up quickly
// against a dead or black-holed server: the defaults (30 s dial, 60 s response
// header) would let one call hang for minutes when the caller set no deadline.
const (
	dialTimeout           = 5 * time.Second
	responseHeaderTimeout = 30 * time.Second
)

// Config configures a Store.
type Config struct {
	// Endpoint is the server's "host:port"; "s3.amazonaws.com" when empty.
	Endpoint string
	// Bucket holds the objects; required.
	Bucket string
	// AccessKey, SecretKey and SessionToken are static credentials; all empty means
	// anonymous requests.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// Region is the bucket's region; DefaultRegion when empty.
	Region string
	// PathStyle addresses buckets as "endpoint/bucket" instead of "bucket.endpoint";
	// MinIO, versitygw and most non-AWS servers need it.
	PathStyle bool
	// Secure enables TLS.
	Secure bool
	// Prefix is prepended to every key, so several deployments can share a bucket.
	// A trailing "/" is added when missing.
	Prefix string
	// MaxSize caps each object in bytes; blob.DefaultMaxSize when zero or negative.
	// Put buffers whole objects in memory, so this also bounds its memory use.
	MaxSize int64
	// CreateBucket makes New create the bucket when it does not exist, for tests and
	// single-node deployments that have nobody to provision it.
	CreateBucket bool
	// MaxRetries is how many times minio-go tries a request that failed transiently;
	// its default (10, about 5 s of backoff) when zero.
	MaxRetries int
}

// Store keeps objects in an S3 bucket. It is safe for concurrent use.
type Store struct {
	client    *minio.Client
	core      minio.Core
	transport *http.Transport
	bucket    string
	prefix    string
	maxSize   int64
	closed    atomic.Bool
}

var _ blob.Store = (*Store)(nil)

// New returns a Store for cfg. It contacts the server only when cfg.CreateBucket is
// set, so a service can start while S3 is briefly down.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3blob: bucket is required")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("s3blob: access key and secret key must be set together")
	}
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, fmt.Errorf("s3blob: transport: %w", err)
	}
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = responseHeaderTimeout

	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       cfg.Secure,
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   cfg.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3blob: endpoint %q: %w", cfg.Endpoint, err)
	}
	prefix := strings.TrimLeft(cfg.Prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	maxSize := cfg.MaxSize
	if maxSize <= 0 {
		maxSize = blob.DefaultMaxSize
	}
	s := &Store{
		client:    client,
		core:      minio.Core{Client: client},
		transport: tr,
		bucket:    cfg.Bucket,
		prefix:    prefix,
		maxSize:   maxSize,
	}
	if cfg.CreateBucket {
		if err := s.ensureBucket(ctx, cfg.Region); err != nil {
			tr.CloseIdleConnections()
			return nil, err
		}
	}
	return s, nil
}

func (s *Store) ensureBucket(ctx context.Context, region string) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("s3blob: check bucket %s: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	err = s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil && errCode(err) != minio.BucketAlreadyOwnedByYou {
		return fmt.Errorf("s3blob: create bucket %s: %w", s.bucket, err)
	}
	return nil
}

// openURL serves blob.OpenURL; see ParseURL for the URL form.
func openURL(ctx context.Context, u *url.URL) (blob.Store, error) {
	cfg, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// ParseURL turns an "s3://" URL into a Config:
//
//	s3://[access:secret@]bucket?endpoint=host:port&region=us-east-1&path_style=true
//	    &secure=false&prefix=p&create_bucket=true&max_size=N&max_retries=N
//
// secure defaults to true, so that a forgotten parameter never sends credentials in
// clear text. Credentials come from the userinfo, else from TRIBUNAL_S3_ACCESS_KEY and
// TRIBUNAL_S3_SECRET_KEY, else from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
// TRIBUNAL_S3_SESSION_TOKEN or AWS_SESSION_TOKEN); having none is an error, because
// an artifact store written anonymously is a misconfiguration. Unknown parameters are
// errors too, since a misspelt one would otherwise be silently ignored.
func ParseURL(u *url.URL) (Config, error) {
	if u.Scheme != Scheme {
		return Config{}, fmt.Errorf("s3blob: scheme %q, want %q", u.Scheme, Scheme)
	}
	cfg := Config{Bucket: u.Host, Secure: true}
	if cfg.Bucket == "" {
		return Config{}, errors.New("s3blob: URL has no bucket (want s3://bucket?...)")
	}
	if u.Path != "" && u.Path != "/" {
		return Config{}, fmt.Errorf("s3blob: URL path %q is not supported; use the prefix parameter", u.Path)
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "endpoint":
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "prefix":
			cfg.Prefix = v
		case "path_style":
			cfg.PathStyle, err = parseBool(k, v)
		case "secure":
			cfg.Secure, err = parseBool(k, v)
		case "create_bucket":
			cfg.CreateBucket, err = parseBool(k, v)
		case "max_size":
			cfg.MaxSize, err = parseInt(k, v, 1)
		case "max_retries":
			var n int64
			n, err = parseInt(k, v, 1)
			cfg.MaxRetries = int(n)
		default:
			err = fmt.Errorf("s3blob: unknown query parameter %q (known: endpoint, region, path_style, secure, prefix, create_bucket, max_size, max_retries)", k)
		}
		if err != nil {
			return Config{}, err
		}
	}

	switch {
	case u.User != nil:
		cfg.AccessKey = u.User.Username()
		cfg.SecretKey, _ = u.User.Password()
		if cfg.AccessKey == "" || cfg.SecretKey == "" {
			return Config{}, errors.New("s3blob: URL userinfo must be access_key:secret_key")
		}
		cfg.SessionToken = firstEnv("TRIBUNAL_S3_SESSION_TOKEN", "AWS_SESSION_TOKEN")
	default:
		var err error
		cfg.AccessKey, cfg.SecretKey, cfg.SessionToken, err = envCredentials()
		if err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

func envCredentials() (access, secret, token string, err error) {
	for _, p := range [][3]string{
		{"TRIBUNAL_S3_ACCESS_KEY", "TRIBUNAL_S3_SECRET_KEY", "TRIBUNAL_S3_SESSION_TOKEN"},
		{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"},
	} {
		a, s := os.Getenv(p[0]), os.Getenv(p[1])
		switch {
		case a != "" && s != "":
			return a, s, os.Getenv(p[2]), nil
		case a != "":
			return "", "", "", fmt.Errorf("s3blob: %s is set but %s is not", p[0], p[1])
		case s != "":
			return "", "", "", fmt.Errorf("s3blob: %s is set but %s is not", p[1], p[0])
		}
	}
	return "", "", "", errors.New("s3blob: no credentials: put access:secret@ in the URL or set TRIBUNAL_S3_ACCESS_KEY and TRIBUNAL_S3_SECRET_KEY")
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

func parseBool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("s3blob: query parameter %s: invalid boolean %q", name, v)
	}
	return b, nil
}

func parseInt(name, v string, min int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min {
		return 0, fmt.Errorf("s3blob: query parameter %s: want an integer >= %d, got %q", name, min, v)
	}
	return n, nil
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// MaxSize returns the per-object size limit in bytes.
func (s *Store) MaxSize() int64 { return s.maxSize }

// Usage implements blob.Usager: the sizes of the tenant's objects, listed from the
// bucket (one request per 1,000 objects; the ingress caches the figure).
func (s *Store) Usage(ctx context.Context, tenant string) (int64, error) {
	if err := blob.ValidateTenant(tenant); err != nil {
		return 0, fmt.Errorf("s3blob: usage: %w", err)
	}
	var total int64
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + tenant + "/", Recursive: true}) {
		if obj.Err != nil {
			return 0, s.wrap("usage", s.prefix+tenant+"/", obj.Err)
		}
		total += obj.Size
	}
	return total, nil
}

// Key returns the object key of ref in the bucket, prefix included, for operators
// and tests that inspect the bucket directly.
func (s *Store) Key(ref blob.Ref) string { return s.prefix + ref.Key() }

func (s *Store) check() error {
	if s.closed.Load() {
		return errors.New("s3blob: store is closed")
	}
	return nil
}

// Put implements blob.Store. The body is buffered in memory (objects are bounded by
// MaxSize) because S3 needs the exact length up front, and because knowing the
// digest before uploading lets Put skip objects that already exist and have the
// server verify the payload against it.
func (s *Store) Put(ctx context.Context, tenant string, r io.Reader, opts blob.PutOptions) (blob.Attrs, error) {
	if err := s.check(); err != nil {
		return blob.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, fmt.Errorf("s3blob: put %s/%s: %w", s.bucket, tenant, err)
	}
	mediaType, expected, err := blob.NormalizePut(tenant, opts)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("s3blob: put: %w", err)
	}
	var buf bytes.Buffer
	n, sum, err := blob.DigestCopy(ctx, &buf, r, s.maxSize)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("s3blob: put %s/%s: %w", s.bucket, tenant, err)
	}
	if err := blob.CheckExpected(tenant, expected, sum); err != nil {
		return blob.Attrs{}, fmt.Errorf("s3blob: put: %w", err)
	}
	ref := blob.Ref{Tenant: tenant, SHA256: sum}
	key := s.Key(ref)

	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	switch {
	case err == nil && info.Size == n:
		// Same bytes already stored: keep the first writer's media type so every
		// caller sees the same Attrs for the same ref.
		return attrsFromInfo(ref, info), nil
	case err == nil:
		// The stored object has the wrong length, so it is damaged; overwrite it with
		// bytes known to hash correctly.
	case !isNotFound(err):
		return blob.Attrs{}, s.wrap("put: stat", key, err)
	}

	// Passing our SHA-256 as the signed payload hash (rather than a streaming
	// signature) makes the server reject the upload if a single byte changes in
	// transit, and keeps the body a seekable reader so minio-go can retry it.
	_, err = s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(buf.Bytes()), n, "", sum, minio.PutObjectOptions{
		ContentType:          mediaType,
		UserMetadata:         map[string]string{metaSHA256: sum},
		DisableContentSha256: true,
		DisableMultipart:     true,
	})
	if err != nil {
		return blob.Attrs{}, s.wrap("put", key, err)
	}
	return blob.Attrs{Ref: ref, Size: n, MediaType: mediaType}, nil
}

// Open implements blob.Store. It stats first because minio-go's GetObject is lazy and
// would report a missing object only at the first Read; the read is then pinned to
// the stat'ed ETag so the attrs returned describe the bytes streamed.
func (s *Store) Open(ctx context.Context, ref blob.Ref) (io.ReadCloser, blob.Attrs, error) {
	if err := s.check(); err != nil {
		return nil, blob.Attrs{}, err
	}
	if err := ref.Validate(); err != nil {
		return nil, blob.Attrs{}, fmt.Errorf("s3blob: open: %w", err)
	}
	key := s.Key(ref)
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return nil, blob.Attrs{}, s.wrap("open: stat", key, err)
	}
	if d := userMeta(info, metaSHA256); d != "" && d != ref.SHA256 {
		// An object copied or renamed to the wrong key: no need to read it to know.
		return nil, blob.Attrs{}, fmt.Errorf("s3blob: open s3://%s/%s: %w: %s is labelled sha256:%s",
			s.bucket, key, blob.ErrDigestMismatch, ref, d)
	}
	var gopts minio.GetObjectOptions
	if info.ETag != "" {
		if err := gopts.SetMatchETag(info.ETag); err != nil {
			return nil, blob.Attrs{}, s.wrap("open", key, err)
		}
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, gopts)
	if err != nil {
		return nil, blob.Attrs{}, s.wrap("open", key, err)
	}
	attrs := attrsFromInfo(ref, info)
	return blob.NewVerifyingReader(&objectReader{obj: obj, s: s, key: key}, attrs), attrs, nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, ref blob.Ref) (blob.Attrs, error) {
	if err := s.check(); err != nil {
		return blob.Attrs{}, err
	}
	if err := ref.Validate(); err != nil {
		return blob.Attrs{}, fmt.Errorf("s3blob: stat: %w", err)
	}
	key := s.Key(ref)
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return blob.Attrs{}, s.wrap("stat", key, err)
	}
	return attrsFromInfo(ref, info), nil
}

// Close implements blob.Store. Later calls fail, so use-after-close bugs surface.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.transport.CloseIdleConnections()
	return nil
}

func attrsFromInfo(ref blob.Ref, info minio.ObjectInfo) blob.Attrs {
	mt := info.ContentType
	if mt == "" {
		mt = blob.DefaultMediaType
	}
	return blob.Attrs{Ref: ref, Size: info.Size, MediaType: mt}
}

func userMeta(info minio.ObjectInfo, key string) string {
	for k, v := range info.UserMetadata {
		if strings.EqualFold(k, key) || strings.EqualFold(k, "X-Amz-Meta-"+key) {
			return v
		}
	}
	return ""
}

// objectReader names the object in read errors, which minio-go reports bare.
type objectReader struct {
	obj *minio.Object
	s   *Store
	key string
}

func (o *objectReader) Read(p []byte) (int, error) {
	n, err := o.obj.Read(p)
	if err != nil && err != io.EOF {
		err = o.s.wrap("read", o.key, err)
	}
	return n, err
}

func (o *objectReader) Close() error { return o.obj.Close() }

func errCode(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return ""
}

// isNotFound reports a missing object. A missing bucket is deliberately not "not
// found": it is a misconfiguration, and reporting it as a missing artifact would send
// operators looking in the wrong place.
func isNotFound(err error) bool {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	if er.Code == minio.NoSuchBucket {
		return false
	}
	return er.Code == minio.NoSuchKey || er.StatusCode == http.StatusNotFound
}

// isFull reports a server out of space: MinIO's XMinioStorageFull, 507 Insufficient
// Storage, or a server that says so in its message (versitygw answers a full disk
// with the system's "no space left on device").
func isFull(err error) bool {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	return er.Code == "XMinioStorageFull" || er.StatusCode == http.StatusInsufficientStorage || diskspace.IsMessage(er.Message) || diskspace.IsMessage(er.Code)
}

// wrap adds the operation, bucket and key to err, turns a missing object into
// blob.ErrNotFound and a full server into a *diskspace.Error naming the bucket.
func (s *Store) wrap(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("s3blob: %s s3://%s/%s: %w", op, s.bucket, key, blob.ErrNotFound)
	}
	if isFull(err) {
		return fmt.Errorf("s3blob: %s s3://%s/%s: %w", op, s.bucket, key, &diskspace.Error{Path: "s3://" + s.bucket, Free: -1, Cause: err})
	}
	return fmt.Errorf("s3blob: %s s3://%s/%s: %w", op, s.bucket, key, err)
}
