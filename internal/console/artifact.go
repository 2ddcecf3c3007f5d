package console

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// maxInlineText is how much of a text artifact a page shows; the whole artifact stays
// one link away.
const maxInlineText = 256 << 10

// artifactView is one artifact as a page shows it (stage.PageArtifact: the kinds'
// sections of the job page show theirs with it too).
type artifactView = stage.PageArtifact

// sourceArtifact shows one input of a job as the batch named it.
func (s *server) sourceArtifact(ctx context.Context, tenant, label string, src events.Source) artifactView {
	a := artifactView{Label: label, Name: src.Name}
	switch {
	case src.Error != "":
		a.Class, a.Note = "missing", src.Error
	case src.URL != "":
		a.Class, a.External = "url", src.URL
		a.Note = "fetched by the renderer at judging time; the job record keeps the URL, not the fetched copy"
	case src.Blob != nil:
		s.fillBlob(ctx, tenant, &a, *src.Blob)
	default:
		a.Class, a.Note = "missing", "no artifact"
	}
	return a
}

// blobArtifact shows a stored blob (a render, a reference, a transcript).
func (s *server) blobArtifact(ctx context.Context, tenant, label string, b *events.Blob) *artifactView {
	if b == nil {
		return nil
	}
	a := artifactView{Label: label}
	s.fillBlob(ctx, tenant, &a, *b)
	return &a
}

func (s *server) fillBlob(ctx context.Context, tenant string, a *artifactView, b events.Blob) {
	a.SHA256, a.Size, a.Href = b.SHA256, b.Size, blobHref(tenant, b.SHA256)
	data, attrs, err := blob.ReadAll(ctx, s.cfg.Store, blob.Ref{Tenant: tenant, SHA256: b.SHA256})
	switch {
	case errors.Is(err, blob.ErrNotFound):
		a.Class, a.Note, a.Href = "missing", "not in blob storage", ""
		return
	case errors.Is(err, blob.ErrDigestMismatch):
		a.Class, a.Note, a.Href = "missing", "stored bytes do not match their digest", ""
		return
	case err != nil:
		a.Class, a.Note = "binary", "could not be read: "+err.Error()
		return
	}
	declared := b.MediaType
	if declared == "" || declared == "application/octet-stream" {
		declared = attrs.MediaType
	}
	if declared == "application/octet-stream" {
		declared = ""
	}
	c := artifact.Classify(a.Name, data, declared)
	a.MediaType = c.MediaType
	switch {
	case c.Blocked != "":
		a.Class, a.Note, a.MediaType = "binary", c.Blocked, declared
	case c.Class == artifact.ClassImage:
		a.Class = "image"
	default:
		a.Class = c.Class
		a.Text, a.Truncated = clipText(data)
	}
}

// clipText cuts text to maxInlineText on a character boundary.
func clipText(data []byte) (string, bool) {
	if len(data) <= maxInlineText {
		return string(data), false
	}
	cut := data[:maxInlineText]
	for i := 0; i < utf8.UTFMax && len(cut) > 0; i++ {
		if r, size := utf8.DecodeLastRune(cut); r != utf8.RuneError || size > 1 {
			break
		}
		cut = cut[:len(cut)-1]
	}
	return string(cut), true
}

// servedType is the media type an artifact is served with: the stored one, unless the
// object was stored untyped (uploaded files are), in which case the bytes decide between
// an image, plain text and a download. A sniffed type never becomes HTML: only a type
// recorded at storage time does, and then under the sandbox policy set by the handler.
func servedType(stored string, head []byte) (ctype string, download bool) {
	if stored != "" && stored != "application/octet-stream" {
		return stored, false
	}
	sniffed := http.DetectContentType(head)
	switch {
	case strings.HasPrefix(sniffed, "image/") && sniffed != "image/svg+xml":
		return sniffed, false
	case strings.HasPrefix(sniffed, "text/"):
		return "text/plain; charset=utf-8", false
	}
	return "application/octet-stream", true
}

// blob serves one artifact of a tenant the caller may see. Artifacts are data from the
// teams' builds: they are served under a sandbox policy (no script runs, a unique
// origin), never sniffed, and only framed by the console itself.
func (s *server) blob(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, sha := r.PathValue("tenant"), r.PathValue("sha256")
	ref := blob.Ref{Tenant: tenant, SHA256: sha}
	if !c.sees(tenant) || ref.Validate() != nil {
		s.notFound(w, r)
		return
	}
	rc, attrs, err := s.cfg.Store.Open(r.Context(), ref)
	if errors.Is(err, blob.ErrNotFound) {
		s.notFound(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 512)
	head, _ := br.Peek(512)
	ctype, download := servedType(attrs.MediaType, head)
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.FormatInt(attrs.Size, 10))
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'self'")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("ETag", `"`+sha+`"`)
	if download {
		h.Set("Content-Disposition", `attachment; filename="`+sha+`"`)
	}
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, br); err != nil {
		// The headers are gone; cutting the connection is the only way to tell the
		// client that what it got is not the artifact (a digest mismatch surfaces here).
		s.log.Error("serve blob", "ref", ref.String(), "err", err)
		panic(http.ErrAbortHandler)
	}
}
