package s3server

import (
	"bytes"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Client is a plain S3 client of the server with its root credentials, for tests that
// reach objects behind a driver's back.
func (s *Server) Client(tb testing.TB) *minio.Client {
	tb.Helper()
	c, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure: s.Secure, Region: s.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Rewrite replaces the object at bucket/key behind the driver's back, as bit rot or an
// operator's edit would: edit gets the object's bytes and content type and returns the
// new ones; its user metadata is kept, so only what edit changes differs.
func Rewrite(tb testing.TB, c *minio.Client, bucket, key string, edit func(data []byte, contentType string) ([]byte, string)) {
	tb.Helper()
	ctx := tb.Context()
	info, err := c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		tb.Fatal(err)
	}
	meta := map[string]string{}
	for k, v := range info.UserMetadata {
		meta[k] = v
	}
	data, contentType := edit(data, info.ContentType)
	if _, err := c.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType, UserMetadata: meta}); err != nil {
		tb.Fatal(err)
	}
}
