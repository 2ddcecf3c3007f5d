package audit_test

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/tribunal-dev/tribunal/internal/testutil/s3server"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/s3blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestAuditEditedMediaTypeOnS3: the s3 driver keeps a blob's media type as the object's
// Content-Type; one changed behind the driver's back (the object rewritten with the same
// bytes) is reported as on the file driver.
func TestAuditEditedMediaTypeOnS3(t *testing.T) {
	srv := s3server.Start(t)
	cfg := s3blob.Config{Endpoint: srv.Endpoint, Bucket: s3server.Bucket(t), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Region: srv.Region, PathStyle: true, Secure: srv.Secure, CreateBucket: true}
	st, err := s3blob.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFixtureOn(t, st)
	f.stagedJob("AC-1", 0, 1, "tie", 0.4)
	if rep := f.audit(); !rep.OK() {
		t.Fatalf("honest batch on s3:%s", dump(rep))
	}

	ours := ab.SpecOf(f.recs[f.find(events.TypeRenderDone, "AC-1")].Event.Payload.(*events.RenderDone).Spec.KindPart).Ours.Blob
	key := st.Key(blob.Ref{Tenant: f.tenant, SHA256: ours.SHA256})
	s3server.Rewrite(t, srv.Client(t), cfg.Bucket, key, func(data []byte, _ string) ([]byte, string) {
		return data, "text/html"
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMismatch && m.Job == "AC-1" && m.Field == "spec.ab.ours.blob.media_type" && m.Recorded == "text/html" && m.Derived == "text/markdown"
	}) {
		t.Fatalf("media type changed on s3 not reported:%s", dump(rep))
	}
}
