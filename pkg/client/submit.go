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
	// DefaultMode is the mode of a rubric AC that names none; empty means headless.
	// `tribunal run` on a terminal sets interactive, the seed's default.
	DefaultMode string
	Log         *slog.Logger
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
	if err := events.ValidateName(batchID); err != nil {
		return Submission{}, fmt.Errorf("batch id: %w", err)
	}
	sub := Submission{Tenant: tenant, BatchID: batchID}
	prep, err := s.Prepare(ctx, b, tenant)
	if prep != nil {
		sub.Rejected, sub.Jobs = prep.Rejected, prep.Len()
	}
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
	err = prep.Jobs(func(i int, j Job) error {
		submitted := SubmittedEvent(tenant, batchID, j.ID, j.Iteration, &events.JobSubmitted{Spec: j.Spec, Index: i, BatchSize: prep.Len(), BatchSource: b.Path})
		m, err := bus.Messages(submitted)
		if err != nil {
			return fmt.Errorf("AC %s: %w", j.ID, err)
		}
		msgs = append(msgs, m...)
		if len(msgs) >= 2000 {
			if err := flush(); err != nil {
				return fmt.Errorf("publish batch %s: %w", batchID, err)
			}
		}
		return nil
	})
	if err != nil {
		return sub, err
	}
	if err := flush(); err != nil {
		return sub, fmt.Errorf("publish batch %s: %w", batchID, err)
	}
	return sub, nil
}

// Prepared is a batch resolved into jobs, its artifacts uploaded: what Submit publishes,
// and what `tribunal validate` shows without publishing anything.
type Prepared struct {
	// Rejected are entries that could not be submitted at all (no usable id).
	Rejected []string
	batch    *batch.Batch
	plans    []planned
	uploads  map[string]events.Source
}

// planned is one job of the batch and the entry it came from.
type planned struct {
	kind.Plan
	ac batch.AC
}

// Job is one job of a prepared batch: most ACs are one job, a rubric AC one per view.
type Job struct {
	// ID is the job's id: the AC id, or "<AC>--<view>" for a rubric view.
	ID        string
	AC        batch.AC
	Iteration int
	Spec      events.JobSpec
}

// Len is the number of jobs.
func (p *Prepared) Len() int { return len(p.plans) }

// Jobs calls fn with each job and its index, in submission order, building each spec on
// the way so that a large batch's specs are never all held at once. It stops at fn's
// first error.
func (p *Prepared) Jobs(fn func(i int, j Job) error) error {
	for i, pl := range p.plans {
		iteration := p.batch.Iteration
		if pl.ac.Iteration != nil {
			iteration = *pl.ac.Iteration
		}
		if err := fn(i, Job{ID: pl.JobID, AC: pl.ac, Iteration: iteration, Spec: pl.Build(p.uploads)}); err != nil {
			return err
		}
	}
	return nil
}

// Prepare resolves every AC of b into its jobs and uploads their artifacts under tenant,
// without publishing anything. An AC with a problem is still a job, blocked with it.
func (s *Submitter) Prepare(ctx context.Context, b *batch.Batch, tenant string) (*Prepared, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	prep := &Prepared{batch: b}
	for _, r := range b.Rejected {
		prep.Rejected = append(prep.Rejected, r.Error())
	}
	env := &kind.PlanEnv{Batch: b, Tenant: tenant, Store: s.Store, AllowOutside: s.AllowOutside, ServeFeature: s.ServeFeature, DefaultMode: s.DefaultMode}
	// Most ACs are one job; a rubric AC is one job per view of its feature.
	var names []string
	seenName := map[string]bool{}
	for _, ac := range b.ACs {
		k, err := kinds.Lookup(events.Kind(b.KindOf(ac)))
		if err != nil {
			return prep, fmt.Errorf("%s: %s", b.Path, kind.Problem(ac, err.Error()))
		}
		ps, err := k.Plan(ctx, env, ac)
		if err != nil {
			return prep, err
		}
		for _, p := range ps {
			prep.plans = append(prep.plans, planned{Plan: p, ac: ac})
			for _, n := range p.Names {
				if !seenName[n] {
					seenName[n] = true
					names = append(names, n)
				}
			}
		}
	}
	var err error
	if prep.uploads, err = s.uploadAll(ctx, b, tenant, names); err != nil {
		return prep, err
	}
	return prep, nil
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
