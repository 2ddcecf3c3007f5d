package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// DefaultWindow is how many ACs a submission plans, checks and publishes at a time. At
// about 2 KB planned per AC (its plan, its resolved artifacts, the small artifacts'
// bytes kept for their upload) a window is some 20 MB; a batch of 1,000,000 ACs held
// whole was 2.1 GB (docs/benchmarks.md).
const DefaultWindow = 10_000

func (s *Submitter) windowSize() int {
	if s.Window > 0 {
		return s.Window
	}
	return DefaultWindow
}

// maxJobs is the most jobs a batch may have, and maxJobsWhy what sets it.
func (s *Submitter) maxJobs() int {
	if s.MaxJobs > 0 {
		return min(s.MaxJobs, events.MaxBatchSize)
	}
	return events.MaxBatchSize
}

func (s *Submitter) maxJobsWhy() string {
	if s.MaxJobs > 0 && s.MaxJobs < events.MaxBatchSize {
		return "the submitter's limit"
	}
	return "events.MaxBatchSize: split the work into several batches"
}

// planWindow plans ACs [lo, hi) of the batch, whose first job is the batch's job first,
// and resolves their artifacts.
func (p *Prepared) planWindow(ctx context.Context, lo, hi, first int) (*window, error) {
	w := &window{first: first}
	var names []string
	seen := map[string]bool{}
	for i := lo; i < hi; i++ {
		ps, err := p.planAC(ctx, i)
		if err != nil {
			return nil, err
		}
		for _, pl := range ps {
			w.plans = append(w.plans, pl)
			for _, n := range pl.Names {
				if !seen[n] {
					seen[n] = true
					names = append(names, n)
				}
			}
		}
	}
	w.arts = &artifacts{files: map[string]*artifact{}, uploaded: map[string]bool{}}
	var err error
	if w.uploads, err = p.sub.resolveAll(ctx, p.batch, names, w.arts); err != nil {
		return nil, err
	}
	return w, nil
}

// planAC plans the batch's i-th AC into its jobs: most ACs are one job, a rubric AC one
// per view of its feature. An AC check planned again as blocked is planned so.
func (p *Prepared) planAC(ctx context.Context, i int) ([]planned, error) {
	b := p.batch
	ac := b.ACs[i]
	k, err := registry.Lookup(events.Kind(b.KindOf(ac)))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", b.Path, stage.Problem(ac, err.Error()))
	}
	if problem, ok := p.blocked[i]; ok {
		ac = batch.AC{ID: ac.ID, Kind: ac.Kind, Line: ac.Line}.WithIteration(ac.Iteration()).WithProblem(problem)
	} else if ac.Problem() == "" {
		// A kind that takes no trials or ladder has the entry blocked, naming the key.
		if why := kind.RefuseRepeats(k, b.RepeatsOf(ac)); why != "" {
			ac = ac.WithProblem(stage.Problem(ac, why))
		} else if why := kind.RefuseDecides(k); why != "" && b.Review != nil && b.Review.Decides {
			// A kind whose reviews only measure has the entry blocked, naming the key.
			ac = ac.WithProblem(stage.Problem(ac, why))
		}
	}
	ps, err := k.Plan(ctx, p.env, ac)
	if err != nil {
		return nil, err
	}
	out := make([]planned, 0, len(ps))
	for _, pl := range ps {
		withBudget(&pl, b.Budget)
		out = append(out, planned{Plan: pl, ac: ac, index: i})
	}
	return out, nil
}

// each calls fn with every job in submission order, its window and its plan, building
// each spec on the way. A batch of more than one window is planned again here, a window
// at a time, and every job's spec must be the one Prepare checked and announced in its
// plan's digest: a file changed since fails the pass, naming the AC.
func (p *Prepared) each(ctx context.Context, fn func(w *window, pl *planned, i int, j Job) error) error {
	if p.kept != nil || len(p.batch.ACs) == 0 {
		if p.kept == nil {
			return nil
		}
		for k := range p.kept.plans {
			pl := &p.kept.plans[k]
			if err := fn(p.kept, pl, k, p.job(pl, p.kept.uploads)); err != nil {
				return err
			}
		}
		return nil
	}
	first := 0
	for lo := 0; lo < len(p.batch.ACs); lo += p.window {
		w, err := p.planWindow(ctx, lo, min(lo+p.window, len(p.batch.ACs)), first)
		if err != nil {
			return err
		}
		for k := range w.plans {
			pl, i := &w.plans[k], first+k
			j := p.job(pl, w.uploads)
			if sum, err := specSum(j); err != nil {
				return err
			} else if i >= len(p.sums) || binary.BigEndian.Uint64(sum[:8]) != p.sums[i] {
				return fmt.Errorf("%s: AC %s: its job %s is not the one prepared: %w (cancel the batch and submit it again)", p.batch.Path, pl.ac.ID, j.ID, errArtifactChanged)
			}
			if err := fn(w, pl, i, j); err != nil {
				return err
			}
		}
		first += len(w.plans)
	}
	if first != p.jobs {
		return fmt.Errorf("%s: planned again into %d jobs, not the %d prepared: %w (cancel the batch and submit it again)", p.batch.Path, first, p.jobs, errArtifactChanged)
	}
	return nil
}

// specSum is the SHA-256 of a job's spec as JSON, what the plan's digest is taken over.
func specSum(j Job) ([sha256.Size]byte, error) {
	spec, err := json.Marshal(j.Spec)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("AC %s: encode spec: %w", j.ID, err)
	}
	return sha256.Sum256(spec), nil
}

// checker checks a batch's windows as Prepare plans them (check), and takes the plan's
// digest and writes its pages (addToPlan) once the batch is known to be publishable so
// far.
type checker struct {
	s                 *Submitter
	prep              *Prepared
	limit, maxPayload int64
	maxJobs           int
	// refused are the problems that refuse the batch; owner the AC (by index) of each
	// job id.
	refused []string
	owner   map[string]int
	// spend's problems, listed after the others, with what spendProblems counts.
	spendOut  []string
	spendSeen map[string]bool
	spendMore int
	// digest and the plan's pages so far, written to pending.
	digest  hash.Hash
	pages   []events.Blob
	page    records.PlanPage
	pending *pendingPages
}

func (s *Submitter) newChecker(prep *Prepared) *checker {
	limit, maxPayload := s.eventLimit()
	return &checker{s: s, prep: prep, limit: limit, maxPayload: maxPayload, maxJobs: s.maxJobs(),
		owner: map[string]int{}, spendSeen: map[string]bool{}, digest: sha256.New(), pending: &pendingPages{}}
}

// window checks one planned window (check, spendProblems) and, while nothing refuses
// the batch, adds its jobs to the plan.
func (c *checker) window(ctx context.Context, w *window) error {
	// The events are measured as published. A batch's count of jobs is known only once
	// it is planned whole: a batch of more than one window is measured at its count of
	// ACs, its count of jobs but for a kind of several jobs an AC (a few bytes of the
	// EventHeadroom).
	size := max(len(w.plans), 1)
	if len(c.prep.batch.ACs) > c.prep.window {
		size = len(c.prep.batch.ACs)
	}
	if err := c.s.check(ctx, c, w, size); err != nil {
		return err
	}
	c.s.spendProblems(c, w)
	if len(c.refused) > 0 || len(c.spendOut) > 0 {
		return nil // refused: no plan to write
	}
	return c.addToPlan(w)
}

// done refuses the batch with every problem found, or stores the plan's last page and
// makes the batch.opened it announces.
func (c *checker) done(ctx context.Context) error {
	refused := c.refused
	if len(c.spendOut) > 0 {
		refused = append(refused, c.spendOut...)
		if c.spendMore > 0 {
			refused = append(refused, fmt.Sprintf("and %d more", c.spendMore))
		}
	}
	if len(refused) > 0 {
		c.pending.close()
		return &RefusedError{Batch: c.prep.batch.Path, Problems: refused}
	}
	if len(c.page.Jobs) > 0 {
		if err := c.flush(); err != nil {
			return err
		}
	}
	c.prep.pages = c.pending
	c.prep.plan = events.BatchOpened{Size: c.prep.jobs, Source: c.prep.batch.Path, Digest: hex.EncodeToString(c.digest.Sum(nil)), Pages: c.pages}
	return nil
}

// addToPlan adds a window's jobs to the batch's plan: every job's id, kind and
// iteration, in index order, in pages for blob storage, and its digest over every job's
// id, iteration and spec. The aggregator reads a page only to cancel the batch; a
// resumed submission compares the digest to tell a changed batch. A batch of more than
// one window keeps each job's spec digest, which publishing checks its jobs against.
func (c *checker) addToPlan(w *window) error {
	prep := c.prep
	for k := range w.plans {
		pl := &w.plans[k]
		j := prep.job(pl, w.uploads)
		sum, err := specSum(j)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.digest, "%s\x1f%d\x1f%x\n", j.ID, j.Iteration, sum)
		if c.s.Inspect != nil {
			c.s.Inspect(j)
		}
		if prep.kept == nil && len(prep.batch.ACs) > prep.window {
			prep.sums = append(prep.sums, binary.BigEndian.Uint64(sum[:8]))
		}
		c.page.Jobs = append(c.page.Jobs, records.PlannedJob{ID: j.ID, Kind: j.Spec.Kind, Iteration: j.Iteration})
		if len(c.page.Jobs) == events.PlanPageSize {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush ends the plan's current page: encoded and named by its digest, as the store
// will name it, and kept pending until the batch.opened that announces it is published.
func (c *checker) flush() error {
	data, err := records.EncodePlanPage(c.page)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if err := c.pending.add(data); err != nil {
		return fmt.Errorf("plan page %d of %s: %w", len(c.pages), c.prep.batch.Path, err)
	}
	c.pages = append(c.pages, events.Blob{SHA256: hex.EncodeToString(sum[:]), MediaType: planMediaType, Size: int64(len(data))})
	c.page = records.PlanPage{First: c.page.First + len(c.page.Jobs)}
	return nil
}

const planMediaType = "application/json"

// pendingPages are a batch's plan pages between Prepare and its batch.opened: in a
// temporary file of their own (a 1,000,000-job plan is some 250 pages of 4,096 jobs), not
// in the blob store. A page stored as Prepare reached it was left there unused by a batch
// refused in a later window, or only validated; now a page is stored only as the
// batch.opened naming it is about to be published (Prepared.storePages).
type pendingPages struct {
	file  *os.File
	spans [][2]int64
	end   int64
	// held are the pages where no file could be made: in memory.
	held [][]byte
}

func (p *pendingPages) add(data []byte) error {
	if p.file == nil && p.held == nil {
		if f, err := os.CreateTemp("", "tribunal-plan-*"); err == nil {
			// Removed at once: the open file is this batch's alone, and goes when closed.
			os.Remove(f.Name())
			p.file = f
		}
	}
	if p.file == nil {
		p.held = append(p.held, data)
		return nil
	}
	if _, err := p.file.WriteAt(data, p.end); err != nil {
		return fmt.Errorf("write the pending plan: %w", err)
	}
	p.spans = append(p.spans, [2]int64{p.end, int64(len(data))})
	p.end += int64(len(data))
	return nil
}

// page is the i-th pending page.
func (p *pendingPages) page(i int) ([]byte, error) {
	if p.file == nil {
		return p.held[i], nil
	}
	sp := p.spans[i]
	data := make([]byte, sp[1])
	if _, err := p.file.ReadAt(data, sp[0]); err != nil {
		return nil, fmt.Errorf("read the pending plan: %w", err)
	}
	return data, nil
}

func (p *pendingPages) close() {
	if p != nil && p.file != nil {
		p.file.Close()
		p.file = nil
	}
}

// storePages stores the plan's pages in the blob store, each checked against the digest
// its batch.opened names, just before that batch.opened is published: the first thing a
// submission stores, so a batch refused before it leaves nothing in the store. A page
// the store holds already (the same batch file submitted before) costs nothing.
func (s *Submitter) storePages(ctx context.Context, prep *Prepared, tenant string) error {
	if prep.pages == nil && len(prep.plan.Pages) > 0 {
		return fmt.Errorf("%s: the plan's pages are not prepared", prep.batch.Path)
	}
	for i, ref := range prep.plan.Pages {
		data, err := prep.pages.page(i)
		if err != nil {
			return fmt.Errorf("plan page %d of %s: %w", i, prep.batch.Path, err)
		}
		if _, err := s.Store.Put(ctx, tenant, bytes.NewReader(data), blob.PutOptions{MediaType: ref.MediaType, ExpectedSHA256: ref.SHA256}); err != nil {
			return fmt.Errorf("store plan page %d of %s: %w", i, prep.batch.Path, err)
		}
	}
	return nil
}
