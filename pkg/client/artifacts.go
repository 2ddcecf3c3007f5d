package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	art "github.com/tribunal-dev/tribunal/pkg/artifact"

	"golang.org/x/sync/errgroup"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
)

// A batch's artifacts are resolved in two passes. Prepare reads and hashes every local
// file, so each job's event (which names its artifacts by digest) is built and checked
// before anything is published; the upload happens while publishing, each artifact just
// before the first job that needs it, so the services start on the first jobs while later
// artifacts are still being stored.

// keepBytes is the largest file whose bytes Prepare keeps for the upload, and keepTotal
// the most it keeps in all: small artifacts, the usual case, are read once; larger ones
// are read again when they are uploaded.
const (
	keepBytes = 64 << 10
	keepTotal = 256 << 20
)

// artifact is a local file to upload: its path, digest, size and, when small, its bytes.
type artifact struct {
	path string
	sha  string
	size int64
	data []byte
}

// artifacts are a prepared batch's local files, by name as the batch names them.
type artifacts struct {
	mu       sync.Mutex
	files    map[string]*artifact
	uploaded map[string]bool
	kept     int64
}

func (a *artifacts) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.files))
	for n := range a.files {
		out = append(out, n)
	}
	return out
}

// resolveAll resolves every distinct artifact name, hashing local files in parallel.
func (s *Submitter) resolveAll(ctx context.Context, b *batch.Batch, names []string, arts *artifacts) (map[string]events.Source, error) {
	out := make([]events.Source, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, n := range names {
		g.Go(func() error {
			src, err := s.resolve(gctx, b, n, arts)
			out[i] = src
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	m := make(map[string]events.Source, len(names))
	for i, n := range names {
		m[n] = out[i]
	}
	return m, nil
}

// resolve hashes a local artifact (noting it for upload) or passes a URL through. A
// missing or unreadable file becomes the source's error: the AC is blocked, the batch goes
// on.
func (s *Submitter) resolve(ctx context.Context, b *batch.Batch, name string, arts *artifacts) (events.Source, error) {
	if name == "" {
		return events.Source{Name: "(none)", Error: art.CauseMissing + ": no path given"}, nil
	}
	if batch.IsURL(name) {
		return events.Source{Name: name, URL: name}, nil
	}
	src := events.Source{Name: name}
	path, err := b.LocalPath(name, s.AllowOutside)
	if err != nil {
		src.Error = art.CauseRefused + ": " + err.Error()
		return src, nil
	}
	limit := s.artifactLimit()
	// Only a regular file is read: opening a FIFO would block this submission forever.
	f, st, err := localfile.Open(path)
	if err != nil {
		var nr *localfile.NotRegularError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			src.Error = art.CauseMissing + ": " + name
		case errors.As(err, &nr):
			src.Error = fmt.Sprintf("%s: %s is %s, not a regular file", art.CauseUnreadable, name, nr.Kind)
		default:
			src.Error = art.CauseUnreadable + ": " + err.Error()
		}
		return src, nil
	}
	defer f.Close()
	if st.Size() > limit {
		src.Error = fmt.Sprintf("%s: %s is larger than %d bytes", art.CauseUnreadable, name, limit)
		return src, nil
	}
	var buf bytes.Buffer
	var w io.Writer = io.Discard
	if st.Size() <= keepBytes {
		w = &buf
	}
	n, sha, err := blob.DigestCopy(ctx, w, f, limit)
	switch {
	case errors.Is(err, blob.ErrTooLarge):
		src.Error = fmt.Sprintf("%s: %s is larger than %d bytes", art.CauseUnreadable, name, limit)
		return src, nil
	case ctx.Err() != nil:
		return src, ctx.Err()
	case err != nil:
		src.Error = art.CauseUnreadable + ": " + err.Error()
		return src, nil
	}
	a := &artifact{path: path, sha: sha, size: n}
	arts.mu.Lock()
	if buf.Len() == int(n) && arts.kept+n <= keepTotal {
		a.data, arts.kept = buf.Bytes(), arts.kept+n
	}
	arts.files[name] = a
	arts.mu.Unlock()
	src.Blob = &events.Blob{SHA256: sha, MediaType: blob.DefaultMediaType, Size: n}
	return src, nil
}

func (s *Submitter) artifactLimit() int64 {
	if s.MaxArtifactBytes > 0 {
		return s.MaxArtifactBytes
	}
	return blob.ArtifactMaxSize
}

// errArtifactChanged marks a file whose bytes are no longer the ones its jobs' events
// name: it changed between Prepare and its upload.
var errArtifactChanged = errors.New("artifact changed while the batch was being submitted")

// upload stores the named artifacts not stored yet, in parallel, each checked against
// the digest its jobs' events name, and makes them durable together before it returns:
// the events naming them are published after it.
func (s *Submitter) upload(ctx context.Context, tenant string, arts *artifacts, names []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, n := range names {
		arts.mu.Lock()
		a, ok := arts.files[n]
		if !ok || arts.uploaded[n] {
			arts.mu.Unlock()
			continue
		}
		arts.uploaded[n] = true
		arts.mu.Unlock()
		g.Go(func() error { return s.uploadOne(gctx, tenant, n, a) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := blob.Sync(ctx, s.Store); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	return nil
}

func (s *Submitter) uploadOne(ctx context.Context, tenant, name string, a *artifact) error {
	var r io.Reader = bytes.NewReader(a.data)
	if a.data == nil {
		f, _, err := localfile.Open(a.path)
		if err != nil {
			return fmt.Errorf("upload %s: %w: %w", name, errArtifactChanged, err)
		}
		defer f.Close()
		r = f
	}
	// Put stops reading when ctx ends (blob.DigestCopy) and refuses bytes other than the
	// ones hashed.
	_, err := s.Store.Put(ctx, tenant, &limitedReader{r: r, left: a.size}, blob.PutOptions{ExpectedSHA256: a.sha, Deferred: true})
	switch {
	case errors.Is(err, blob.ErrDigestMismatch) || errors.Is(err, errArtifactTooLarge) || errors.Is(err, blob.ErrTooLarge):
		return fmt.Errorf("upload %s: %w (cancel the batch and submit it again)", name, errArtifactChanged)
	case err != nil:
		return fmt.Errorf("upload %s: %w", name, err)
	}
	return nil
}

var errArtifactTooLarge = errors.New("artifact too large")

// limitedReader fails, rather than truncating, once more than left bytes were read: a
// file that grew after it was hashed must not be stored cut short.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errArtifactTooLarge
	}
	return n, err
}
