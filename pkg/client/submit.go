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
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
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
	Log   *slog.Logger
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
type Prepared struct {
	// Rejected are entries that could not be submitted at all (no usable id).
	Rejected []string
	// Blocked are ACs planned again as blocked because their events could not be
	// published as they were, each with the field at fault.
	Blocked []string
	batch   *batch.Batch
	plans   []planned
	uploads map[string]events.Source
	// arts are the local files behind uploads, stored as their first job is published.
	arts *artifacts
	// plan is the batch's plan as batch.opened announces it: its digest and stored pages.
	plan events.BatchOpened
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

// planned is one job of the batch and the entry it came from.
type planned struct {
	stage.Plan
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
		spec := pl.Build(p.uploads)
		// The judge mode is the batch's, for every kind alike.
		spec.JudgeMode = p.batch.JudgeMode
		spec.Review = reviewSpec(p.batch, pl.ac)
		if spec.Problem == "" {
			// Trials and a ladder too; an entry already at fault asks nothing.
			spec.Repeats = p.batch.RepeatsOf(pl.ac)
		}
		if err := fn(i, Job{ID: pl.JobID, AC: pl.ac, Iteration: iteration, Spec: spec}); err != nil {
			return err
		}
	}
	return nil
}

// Prepare resolves every AC of b into its jobs and reads and hashes their local artifacts,
// without publishing anything; the files are stored as publishing reaches their jobs. An AC with a problem is still a job, blocked with it. Every
// job's event is then built, validated and measured against the bus's max payload (check),
// and the batch's plan is stored for its batch.opened: what Submit publishes is known to
// be publishable before the first event goes out.
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
	env := &stage.PlanEnv{Batch: b, Tenant: tenant, Store: s.Store, AllowOutside: s.AllowOutside, ServeFeature: s.ServeFeature, DefaultMode: s.DefaultMode}
	// Most ACs are one job; a rubric AC is one job per view of its feature.
	var names []string
	seenName := map[string]bool{}
	for _, ac := range b.ACs {
		k, err := registry.Lookup(events.Kind(b.KindOf(ac)))
		if err != nil {
			return prep, fmt.Errorf("%s: %s", b.Path, stage.Problem(ac, err.Error()))
		}
		if ac.Problem == "" {
			// A kind that takes no trials or ladder has the entry blocked, naming the key.
			if why := kind.RefuseRepeats(k, b.RepeatsOf(ac)); why != "" {
				ac.Problem = stage.Problem(ac, why)
			} else if why := kind.RefuseDecides(k); why != "" && b.Review != nil && b.Review.Decides {
				// A kind whose reviews only measure has the entry blocked, naming the key.
				ac.Problem = stage.Problem(ac, why)
			}
		}
		ps, err := k.Plan(ctx, env, ac)
		if err != nil {
			return prep, err
		}
		for _, p := range ps {
			withBudget(&p, b.Budget)
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
	prep.arts = &artifacts{files: map[string]*artifact{}, uploaded: map[string]bool{}}
	if prep.uploads, err = s.resolveAll(ctx, b, names, prep.arts); err != nil {
		return prep, err
	}
	if err := s.check(ctx, prep, env, tenant); err != nil {
		return prep, err
	}
	if err := s.storePlan(ctx, prep, tenant); err != nil {
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
