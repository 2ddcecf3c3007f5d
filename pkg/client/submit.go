// Package client is the submitting side of tribunal: it uploads a batch's artifacts to
// blob storage, publishes one job.submitted per job (the aggregator records it and asks
// for its first render), follows the batch's progress and reads its results. The CLI's
// run, submit, watch and results commands are thin wrappers around it. What differs
// between judge kinds (how an AC becomes jobs, how a result reads) is the kind's
// (pkg/kind/<name>, through the registry pkg/registry).
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/spend"
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
	// MaxPayload is the largest event the bus takes, which every job's event is checked
	// against before anything is published; 0 asks Pub (bus.Publisher knows its
	// connection's), else DefaultMaxPayload.
	MaxPayload int64
	// ServeFeature, when set, serves a rubric feature folder over HTTP and returns its
	// base URL, so targets may name pages inside the folder (the all-in-one mode).
	ServeFeature func(dir string) (string, error)
	// DefaultMode is the mode of a rubric AC that names none; empty means headless.
	// `tribunal run` on a terminal sets interactive, the seed's default.
	DefaultMode string
	// Spend is what the batch may spend (models, judge calls per AC), checked with every
	// job before anything is published: a batch that asks for more is refused whole. Nil
	// asks Pub (the ingress client knows its team's allowance), else checks nothing.
	Spend *spend.Allowance
	// Window is how many ACs are planned, checked and published at a time (default
	// DefaultWindow): what a submission holds planned is a window's, not the batch's.
	Window int
	// MaxJobs is the most jobs a batch may have (default, and at most,
	// events.MaxBatchSize): a batch with more is refused before anything is published, as
	// soon as the count is known.
	MaxJobs int
	// Inspect, when set, is shown every job as Prepare builds it: a caller that looks at
	// each job (the all-in-one's rerun key) need not plan a large batch again with Jobs.
	Inspect func(Job)
	Log     *slog.Logger
}

// Submission describes a submitted batch.
type Submission struct {
	Tenant  string `json:"tenant"`
	BatchID string `json:"batch_id"`
	Jobs    int    `json:"jobs"`
	// Rejected are entries that could not be submitted at all (no usable id).
	Rejected []string `json:"rejected,omitempty"`
	// Blocked are ACs submitted blocked because their events could not be published as
	// they were (too large, invalid), each with the field at fault.
	Blocked []string `json:"blocked,omitempty"`
	// Published counts the jobs this call published; Recorded those a resumed submission
	// found recorded already and did not send again.
	Published int `json:"published"`
	Recorded  int `json:"recorded,omitempty"`
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

// Submit uploads and publishes every AC of b under tenant as batch batchID. Every event is
// built and checked before the first is published (see Prepare), so a batch refused is
// one of which nothing was published; the first event is the batch's batch.opened, so a
// submission interrupted after it can be finished (Resume) or cancelled (Cancel).
func (s *Submitter) Submit(ctx context.Context, b *batch.Batch, tenant, batchID string) (Submission, error) {
	if err := events.ValidateName(batchID); err != nil {
		return Submission{}, fmt.Errorf("batch id: %w", err)
	}
	sub := Submission{Tenant: tenant, BatchID: batchID}
	prep, err := s.Prepare(ctx, b, tenant)
	if prep != nil {
		sub.Rejected, sub.Jobs, sub.Blocked = prep.Rejected, prep.Len(), prep.Blocked
	}
	if err != nil {
		return sub, err
	}
	return s.SubmitPrepared(ctx, prep, tenant, batchID)
}

// SubmitPrepared publishes a batch Prepare resolved, as Submit does: the caller looked
// at it first (the all-in-one mode keys an unchanged rerun by its digest).
func (s *Submitter) SubmitPrepared(ctx context.Context, prep *Prepared, tenant, batchID string) (Submission, error) {
	if err := events.ValidateName(batchID); err != nil {
		return Submission{}, fmt.Errorf("batch id: %w", err)
	}
	sub := Submission{Tenant: tenant, BatchID: batchID, Rejected: prep.Rejected, Jobs: prep.Len(), Blocked: prep.Blocked}
	err := s.publish(ctx, prep, tenant, batchID, nil, false, &sub)
	return sub, err
}

// Prepared is a batch resolved into jobs, its artifacts hashed: what Submit publishes,
// and what `tribunal validate` shows without publishing anything.
//
// A batch of more than one window (Submitter.Window ACs) is not held planned: Prepare
// plans, checks and hashes it a window at a time, keeping of each job only its spec's
// digest, and every later pass over its jobs (Jobs, publishing) plans its windows again,
// each job's spec checked against the digest Prepare took. A batch of one window is
// planned once and kept.
type Prepared struct {
	// Rejected are entries that could not be submitted at all (no usable id).
	Rejected []string
	// Blocked are ACs planned again as blocked because their events could not be
	// published as they were, each with the field at fault.
	Blocked []string
	batch   *batch.Batch
	tenant  string
	sub     *Submitter
	env     *stage.PlanEnv
	// jobs counts the jobs; window is how many ACs are planned at a time.
	jobs, window int
	// kept is the one window of a batch that has one, planned once.
	kept *window
	// blocked are the ACs check planned again as blocked, by their index in the batch,
	// with the problem: a window planned again plans them so at once.
	blocked map[int]string
	// sums are the first 8 bytes of each job's spec digest as Prepare built it (a batch
	// of more than one window).
	sums []uint64
	// plan is the batch's plan as batch.opened announces it: its digest and pages, which
	// pages holds until they are stored, just before the batch.opened.
	plan  events.BatchOpened
	pages *pendingPages
}

// window is some consecutive ACs of a batch, planned: their jobs, from the batch's job
// first on, and their artifacts, resolved.
type window struct {
	first   int
	plans   []planned
	uploads map[string]events.Source
	// arts are the local files behind uploads, stored as their first job is published.
	arts *artifacts
}

// withBudget makes p's spec carry the batch's budget, whatever its kind planned.
func withBudget(p *stage.Plan, budget string) {
	if budget == "" {
		return
	}
	build := p.Build
	p.Build = func(uploads map[string]events.Source) events.JobSpec {
		spec := build(uploads)
		spec.Budget = budget
		return spec
	}
}

// planned is one job of the batch and the entry it came from, at index in the batch.
type planned struct {
	stage.Plan
	ac    batch.AC
	index int
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
func (p *Prepared) Len() int { return p.jobs }

// Jobs calls fn with each job and its index, in submission order, building each spec on
// the way so that a large batch's specs are never all held at once. It stops at fn's
// first error. A batch of more than one window is planned again, a window at a time.
func (p *Prepared) Jobs(fn func(i int, j Job) error) error {
	return p.each(context.Background(), func(_ *window, _ *planned, i int, j Job) error { return fn(i, j) })
}

// job is the job of pl, its spec built from uploads.
func (p *Prepared) job(pl *planned, uploads map[string]events.Source) Job {
	iteration := p.batch.Iteration
	if pl.ac.Iteration() != nil {
		iteration = *pl.ac.Iteration()
	}
	spec := pl.Build(uploads)
	// The judge mode is the batch's, for every kind alike.
	spec.JudgeMode = p.batch.JudgeMode
	spec.Review = reviewSpec(p.batch, pl.ac)
	if spec.Problem == "" {
		// Trials and a ladder too; an entry already at fault asks nothing.
		spec.Repeats = p.batch.RepeatsOf(pl.ac)
	}
	return Job{ID: pl.JobID, AC: pl.ac, Iteration: iteration, Spec: spec}
}

// Prepare resolves every AC of b into its jobs and reads and hashes their local artifacts,
// without publishing anything; the files are stored as publishing reaches their jobs. An
// AC with a problem is still a job, blocked with it. Every job's event is then built,
// validated and measured against the bus's max payload (check), and the batch's plan is
// stored for its batch.opened: what Submit publishes is known to be publishable before
// the first event goes out. A batch of more than Window ACs goes through all of this a
// window at a time and is let go window by window (see Prepared).
func (s *Submitter) Prepare(ctx context.Context, b *batch.Batch, tenant string) (*Prepared, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	prep := &Prepared{batch: b, tenant: tenant, sub: s, window: s.windowSize(), blocked: map[int]string{}}
	for _, r := range b.Rejected {
		prep.Rejected = append(prep.Rejected, r.Error())
	}
	// Refused by its count before anything is planned or hashed: every AC is a job at
	// least.
	if limit := s.maxJobs(); len(b.ACs) > limit {
		return prep, &RefusedError{Batch: b.Path, Problems: []string{fmt.Sprintf("%d ACs, over the %d jobs a batch may have (%s)", len(b.ACs), limit, s.maxJobsWhy())}}
	}
	prep.env = &stage.PlanEnv{Batch: b, Tenant: tenant, Store: s.Store, AllowOutside: s.AllowOutside, ServeFeature: s.ServeFeature, DefaultMode: s.DefaultMode}
	c := s.newChecker(prep)
	for lo := 0; lo < len(b.ACs); lo += prep.window {
		hi := min(lo+prep.window, len(b.ACs))
		w, err := prep.planWindow(ctx, lo, hi, prep.jobs)
		if err != nil {
			return prep, err
		}
		if err := c.window(ctx, w); err != nil {
			return prep, err
		}
		prep.jobs += len(w.plans)
		if prep.jobs > c.maxJobs {
			// Refused as soon as it is known, before the rest is planned.
			return prep, &RefusedError{Batch: b.Path, Problems: []string{fmt.Sprintf("%d jobs in its first %d ACs, over the %d a batch may have (%s)", prep.jobs, hi, c.maxJobs, s.maxJobsWhy())}}
		}
		if len(b.ACs) <= prep.window {
			prep.kept = w
		}
	}
	if err := c.done(ctx); err != nil {
		return prep, err
	}
	return prep, nil
}

// reviewSpec is the review setting a job of b carries: the batch's, with the AC's flag;
// nil when neither asks for people. The sample is drawn under the batch file's name, not
// the run's id, so a rerun of the batch file draws the same sample.
func reviewSpec(b *batch.Batch, ac batch.AC) *events.ReviewSpec {
	if b.Review == nil && !ac.Review {
		return nil
	}
	r := &events.ReviewSpec{Flagged: ac.Review, Name: b.Name}
	if br := b.Review; br != nil {
		r.Share, r.Count, r.Seed, r.Unsure, r.Decides = br.Share, br.Count, br.Seed, br.Unsure, br.Decides
	}
	return r
}
