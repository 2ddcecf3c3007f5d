// Package client is the submitting side of tribunal: it uploads a batch's artifacts to
// blob storage, publishes one job.submitted and one render.requested per AC, follows
// the batch's progress and reads its results. The CLI's run, submit, watch and results
// commands are thin wrappers around it.
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
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
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

// ResolveThreshold picks the `ab` threshold: the batch's own, else
// TRIBUNAL_AB_THRESHOLD, else CFN_AB_CRITIC_THRESHOLD (the seed's variable), else 0.75.
func ResolveThreshold(b *batch.Batch) (float64, error) {
	if b.Threshold != nil {
		return *b.Threshold, nil
	}
	for _, name := range []string{"TRIBUNAL_AB_THRESHOLD", "CFN_AB_CRITIC_THRESHOLD"} {
		if v := os.Getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || ab.CheckThreshold(f) != nil {
				return 0, fmt.Errorf("%s=%q: want a number in [0,1]", name, v)
			}
			return f, nil
		}
	}
	return ab.DefaultThreshold, nil
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
	threshold, err := ResolveThreshold(b)
	if err != nil {
		return Submission{}, err
	}
	verify, verr := b.VerifyMap()
	sub := Submission{Tenant: tenant, BatchID: batchID}
	for _, r := range b.Rejected {
		sub.Rejected = append(sub.Rejected, r.Error())
	}
	// Most ACs are one job; a rubric AC is one job per view of its feature.
	var plans []plan
	var names []string
	seenName := map[string]bool{}
	for _, ac := range b.ACs {
		var ps []plan
		if b.KindOf(ac) == events.KindRubric {
			rp, err := s.planRubric(ctx, b, tenant, ac)
			if err != nil {
				return sub, err
			}
			ps = rp
		} else {
			p, err := s.plan(ctx, b, tenant, ac, threshold, verify, verr)
			if err != nil {
				return sub, err
			}
			p.jobID = ac.ID
			ps = []plan{p}
		}
		for _, p := range ps {
			p.ac = ac
			plans = append(plans, p)
		}
		for _, p := range ps {
			for _, n := range p.names {
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
		spec := p.build(uploads)
		iteration := b.Iteration
		if ac.Iteration != nil {
			iteration = *ac.Iteration
		}
		submitted := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: len(plans), BatchSource: b.Path}, tenant, batchID, p.jobID, iteration, "", nil)
		render := events.New(&events.RenderRequested{Spec: spec}, tenant, batchID, p.jobID, iteration, "", &submitted.Envelope)
		m, err := bus.Messages(submitted, render)
		if err != nil {
			return sub, fmt.Errorf("AC %s: %w", p.jobID, err)
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
	f, err := os.Open(path)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			src.Error = "missing artifact: " + name
		default:
			src.Error = "unreadable artifact: " + err.Error()
		}
		return src, nil
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		src.Error = "unreadable artifact: " + name + " is a directory"
		return src, nil
	} else if err == nil && st.Size() > limit {
		src.Error = fmt.Sprintf("unreadable artifact: %s is larger than %d bytes", name, limit)
		return src, nil
	}
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
