// Package client is the submitting side of tribunal: it uploads a batch's artifacts to
// blob storage, publishes one job.submitted per job (the aggregator records it and asks
// for its first render), follows the batch's progress and reads its results. The CLI's
// run, submit, watch and results commands are thin wrappers around it. What differs
// between judge kinds (how an AC becomes jobs, how a result reads) is the kind's
// (pkg/kind/<name>, through the registry pkg/kinds).
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
)

// Publisher is what submitting needs from the bus.
type Publisher interface {
	Publish(topic string, msgs ...*message.Message) error
}

// Submitter submits batches.
type Submitter struct {
	Pub   Publisher
	Store blob.Store
	// AllowOutside lets artifact paths leave the batch folder.
	AllowOutside bool
	// MaxArtifactBytes bounds one uploaded artifact (default blob.ArtifactMaxSize).
	MaxArtifactBytes int64
	// ServeFeature, when set, serves a rubric feature folder over HTTP and returns its
	// base URL, so targets may name pages inside the folder (the all-in-one mode).
	ServeFeature func(dir string) (string, error)
	Log          *slog.Logger
}

// Submission describes a submitted batch.
type Submission struct {
	Tenant  string `json:"tenant"`
	BatchID string `json:"batch_id"`
	Jobs    int    `json:"jobs"`
	// Rejected are entries that could not be submitted at all (no usable id).
	Rejected []string `json:"rejected,omitempty"`
}

var nameClean = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// NewBatchID names one submission of a batch: its name, the time and a random suffix,
// so resubmitting the same file is a new batch (event ids of the old one would otherwise
// be dropped as duplicates) while the judge cache still recognises unchanged work.
func NewBatchID(b *batch.Batch) string {
	name := b.Name
	if name == "" {
		name = nameClean.ReplaceAllString(filepath.Base(b.Dir), "-")
	}
	if name == "" || name == "-" || name == "." {
		name = "batch"
	}
	if len(name) > 64 {
		name = name[:64]
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s-%s-%s", name, time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(r[:]))
}

// Submit uploads and publishes every AC of b under tenant as batch batchID.
func (s *Submitter) Submit(ctx context.Context, b *batch.Batch, tenant, batchID string) (Submission, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return Submission{}, fmt.Errorf("tenant: %w", err)
	}
	if err := events.ValidateName(batchID); err != nil {
		return Submission{}, fmt.Errorf("batch id: %w", err)
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	sub := Submission{Tenant: tenant, BatchID: batchID}
	for _, r := range b.Rejected {
		sub.Rejected = append(sub.Rejected, r.Error())
	}
	env := &kind.PlanEnv{Batch: b, Tenant: tenant, Store: s.Store, AllowOutside: s.AllowOutside, ServeFeature: s.ServeFeature}
	// Most ACs are one job; a rubric AC is one job per view of its feature.
	var plans []planned
	var names []string
	seenName := map[string]bool{}
	for _, ac := range b.ACs {
		k, err := kinds.Lookup(events.Kind(b.KindOf(ac)))
		if err != nil {
			return sub, fmt.Errorf("%s:%d: acs %s: %w", b.Path, ac.Line, ac.ID, err)
		}
		ps, err := k.Plan(ctx, env, ac)
		if err != nil {
			return sub, err
		}
		for _, p := range ps {
			plans = append(plans, planned{Plan: p, ac: ac})
			for _, n := range p.Names {
				if !seenName[n] {
					seenName[n] = true
					names = append(names, n)
				}
			}
		}
	}
	sub.Jobs = len(plans)
	uploads, err := s.uploadAll(ctx, b, tenant, names)
	if err != nil {
		return sub, err
	}
	var msgs []*message.Message
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		err := s.Pub.Publish("", msgs...)
		msgs = msgs[:0]
		return err
	}
	for i, p := range plans {
		ac := p.ac
		spec := p.Build(uploads)
		iteration := b.Iteration
		if ac.Iteration != nil {
			iteration = *ac.Iteration
		}
		submitted := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: len(plans), BatchSource: b.Path}, tenant, batchID, p.JobID, iteration, "", nil)
		m, err := bus.Messages(submitted)
		if err != nil {
			return sub, fmt.Errorf("AC %s: %w", p.JobID, err)
		}
		msgs = append(msgs, m...)
		if len(msgs) >= 2000 {
			if err := flush(); err != nil {
				return sub, fmt.Errorf("publish batch %s: %w", batchID, err)
			}
		}
	}
	if err := flush(); err != nil {
		return sub, fmt.Errorf("publish batch %s: %w", batchID, err)
	}
	return sub, nil
}

// planned is one job of the batch and the entry it came from.
type planned struct {
	kind.Plan
	ac batch.AC
}

// uploadAll resolves every distinct artifact name, uploading local files in parallel:
// on file storage every object is fsynced, and one at a time that dominates a large
// submission.
func (s *Submitter) uploadAll(ctx context.Context, b *batch.Batch, tenant string, names []string) (map[string]events.Source, error) {
	out := make([]events.Source, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, n := range names {
		g.Go(func() error {
			src, err := s.source(gctx, b, tenant, n)
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

// source uploads a local artifact or passes a URL through. A missing or
// unreadable file becomes the source's error: the AC is blocked, the batch goes on. A
// storage failure is an error: it is nobody's artifact's fault.
func (s *Submitter) source(ctx context.Context, b *batch.Batch, tenant, name string) (events.Source, error) {
	if name == "" {
		return events.Source{Name: "(none)", Error: "missing artifact: no path given"}, nil
	}
	if batch.IsURL(name) {
		return events.Source{Name: name, URL: name}, nil
	}
	src := events.Source{Name: name}
	path, err := b.LocalPath(name, s.AllowOutside)
	if err != nil {
		src.Error = "refused artifact: " + err.Error()
		return src, nil
	}
	limit := s.MaxArtifactBytes
	if limit <= 0 {
		limit = blob.ArtifactMaxSize
	}
	// Only a regular file is read: opening a FIFO would block this submission forever.
	f, st, err := localfile.Open(path)
	if err != nil {
		var nr *localfile.NotRegularError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			src.Error = "missing artifact: " + name
		case errors.As(err, &nr):
			src.Error = fmt.Sprintf("unreadable artifact: %s is %s, not a regular file", name, nr.Kind)
		default:
			src.Error = "unreadable artifact: " + err.Error()
		}
		return src, nil
	}
	defer f.Close()
	if st.Size() > limit {
		src.Error = fmt.Sprintf("unreadable artifact: %s is larger than %d bytes", name, limit)
		return src, nil
	}
	// Put stops reading when ctx ends (blob.DigestCopy).
	attrs, err := s.Store.Put(ctx, tenant, &limitedReader{r: f, left: limit}, blob.PutOptions{})
	switch {
	case errors.Is(err, blob.ErrTooLarge) || errors.Is(err, errArtifactTooLarge):
		src.Error = fmt.Sprintf("unreadable artifact: %s is larger than %d bytes", name, limit)
	case err != nil:
		return src, fmt.Errorf("upload %s: %w", name, err)
	default:
		src.Blob = &events.Blob{SHA256: attrs.Ref.SHA256, MediaType: attrs.MediaType, Size: attrs.Size}
	}
	return src, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

var errArtifactTooLarge = errors.New("artifact too large")

// limitedReader fails, rather than truncating, once more than left bytes were read: a
// file that grew after its size was checked must not be stored cut short.
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
