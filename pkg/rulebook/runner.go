package rulebook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Store is what a Runner reads and writes: the job records, the looping kinds' own
// states, the batches' claims, headers and plan pages, and the count of final jobs that
// completes a batch. Every write is a compare-and-set (over a revision, or create if
// absent), so runners over one store may apply inputs at once: a write that loses says
// so and the runner loads and decides again. The aggregator keeps it in its key-value
// buckets (services/aggregator); the audit and rejudge in memory (Memory).
type Store interface {
	// Job loads a job's record and its revision; nil and 0 for a job not recorded.
	Job(ctx context.Context, tenant, batch, job string) (*records.Job, uint64, error)
	// CreateJob records a new job and, unless its batch has one, header as the batch's
	// header. It reports false, storing nothing, when the job is recorded already.
	CreateJob(ctx context.Context, j *records.Job, header *records.Batch) (bool, error)
	// PutJob stores j over revision rev; false when another writer came first.
	PutJob(ctx context.Context, j *records.Job, rev uint64) (bool, error)
	// State loads what is stored of a looping job's own state under key
	// (kind.Looping.StateKey) and its revision; nil and 0 for a state never stored.
	State(ctx context.Context, key string) ([]byte, uint64, error)
	// PutState stores a state under key over revision rev (0: none stored yet); false
	// when another writer came first.
	PutState(ctx context.Context, key string, data []byte, rev uint64) (bool, error)
	// Document reads a blob of tenant a looping job's state is read with
	// (kind.Looping.StateDocuments).
	Document(ctx context.Context, tenant string, b events.Blob) ([]byte, error)
	// Claim is the job holding a batch's claim (kind.Looping.Claiming), "" for none yet.
	Claim(ctx context.Context, tenant, batch string) (string, error)
	// TakeClaim makes job the holder of its batch's claim unless another job holds it,
	// and returns the holder.
	TakeClaim(ctx context.Context, tenant, batch, job string) (string, error)
	// UpdateHeader applies change to a batch's header by compare-and-set, calling it
	// again on a conflict: change sees nil for a batch with no header and returns the
	// header to store, or nil to leave it as it is.
	UpdateHeader(ctx context.Context, tenant, batch string, change func(*records.Batch) *records.Batch) error
	// PlanPage reads a page of a batch's plan.
	PlanPage(ctx context.Context, tenant string, page events.Blob) (*records.PlanPage, error)
	// Done counts a final job toward its batch's completion (a redriven job toward its
	// redrive's) and, when it was the last, completes the batch: it returns the events
	// to publish and, for a caller that derives the completion itself (the audit), the
	// jobs as they were folded.
	Done(ctx context.Context, j *records.Job) ([]events.Event, *Completion, error)
	// Header loads a batch's header and its revision; nil and 0 for a batch with none.
	Header(ctx context.Context, tenant, batch string) (*records.Batch, uint64, error)
	// PutHeader stores h over revision rev; false when another writer came first.
	PutHeader(ctx context.Context, h *records.Batch, rev uint64) (bool, error)
	// EachJob calls fn with each of a batch's job records, in any order, one at a time.
	EachJob(ctx context.Context, tenant, batch string, fn func(*records.Job) error) error
	// PutCompleted stores a completion's manifests and index where readers find them by
	// their addresses (the completion's refs), before the header names them.
	PutCompleted(ctx context.Context, tenant, batch string, c *Completed) error
}

// maxConflicts bounds how often one input is decided again after a concurrent write.
const maxConflicts = 50

// Runner applies inputs to a Store with the rules: it loads what Apply (or ApplyBatch)
// reads for the input, runs it, stores what it decided by compare-and-set and, when
// another writer came first, loads and decides again; it parks what must wait for a
// batch's claim, counts final jobs toward their batch's completion and applies the inputs
// a final job releases. The aggregator service runs it over its buckets and the audit
// over memory (Memory), so both share the code that loads, applies and stores as well as
// the rules themselves.
type Runner struct {
	Store Store
	// Now is the time the rules stamp when an input carries none (time.Now when nil).
	Now func() time.Time
	// Reannounce republishes what a released input's job had announced already, under
	// the same ids: the aggregator's, so a release a crash cut short is finished (the
	// stream drops the copies). The audit expects no copy and leaves it unset.
	Reannounce bool
	// Refused, when set, hears the reason of every job input the rules refuse, released
	// ones included (the aggregator counts them).
	Refused func(reason string)
	// Stored, when set, hears every result stored (the aggregator's metrics).
	Stored func(Result)
	// Log, when set, hears of a held input that failed at its release.
	Log *slog.Logger
}

// Applied is what a Runner did with one input.
type Applied struct {
	// Result is what the rules decided. Its Publish are the events to publish, in order:
	// the input's, its batch's completion's and those of the inputs it released.
	Result
	// Complete is set when the input completed its batch, or the redrive it belongs to,
	// and the store folds completions for its caller (Memory).
	Complete *Completion
	// Revised is the completion stored, with its manifests, when the input (a deciding
	// review of a batch that completed already) folded the batch again and replaced its
	// completion; nil when it changed none.
	Revised *Completed
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now().UTC()
}

// loaded is what the runner loaded for one input: the rules' state and the revisions
// its writes go over.
type loaded struct {
	st                State
	jobRev, stateRev  uint64
	stateKey          string
	looping           kind.Looping
	tenant, batch, id string
}

// Apply applies one input: a batch-wide one to its batch's header, any other to its job.
// An input the rules refuse is an error matching ErrRefused; an input of a job not
// recorded yet is a result saying NotRecorded, which the caller retries (or, replaying,
// holds back).
func (r *Runner) Apply(ctx context.Context, in Input) (Applied, error) {
	if BatchWide(in.Event) {
		return r.applyBatch(ctx, in)
	}
	tenant, batch, job := JobOf(in.Event)
	_, submission := in.Event.Payload.(*events.JobSubmitted)
	for attempt := 0; ; attempt++ {
		// A submission is nearly always of a job not recorded yet: decide on no record
		// and let the create-if-absent tell otherwise, which loads and decides again.
		l := loaded{st: State{Now: r.now()}, tenant: tenant, batch: batch, id: job}
		if !submission || attempt > 0 {
			var err error
			if l, err = r.load(ctx, tenant, batch, job, in.Event); err != nil {
				return Applied{}, err
			}
		}
		res, err := Apply(l.st, in)
		if err == nil && res.WantsClaim {
			if l.st.Claim, err = r.Store.TakeClaim(ctx, tenant, batch, job); err != nil {
				return Applied{}, err
			}
			if l.st.Holder, err = r.holder(ctx, l.st.Job, l.st.Claim); err != nil {
				return Applied{}, err
			}
			res, err = Apply(l.st, in)
		}
		if err != nil {
			if reason := RefusalReason(err); reason != "" && r.Refused != nil {
				r.Refused(reason)
			}
			return Applied{}, err
		}
		if res.NotRecorded {
			return Applied{Result: res}, nil
		}
		if res.Hold {
			parked, err := r.park(ctx, tenant, batch, l.st.Claim, in)
			if err != nil {
				return Applied{}, err
			}
			if parked {
				return Applied{Result: res}, nil
			}
			// The holder has its outcome by now: decide the input after all.
			continue
		}
		stored, err := r.store(ctx, l, res)
		if err != nil {
			return Applied{}, err
		}
		if !stored {
			if attempt >= maxConflicts {
				return Applied{}, fmt.Errorf("job %s: still conflicting after %d attempts", records.JobKey(tenant, batch, job), attempt)
			}
			continue
		}
		if r.Stored != nil {
			r.Stored(res)
		}
		return r.after(ctx, in, l, res)
	}
}

// after counts a final job toward its batch's completion and applies the inputs it
// releases, once what the rules decided is stored.
func (r *Runner) after(ctx context.Context, in Input, l loaded, res Result) (Applied, error) {
	out := Applied{Result: res}
	out.Publish = append([]events.Event(nil), res.Publish...)
	if res.Done {
		j := res.Job
		if j == nil {
			j = l.st.Job
		}
		more, c, err := r.Store.Done(ctx, j)
		if err != nil {
			return Applied{}, err
		}
		out.Publish, out.Complete = append(out.Publish, more...), c
		if c == nil && completes(more) && j.Spec.Review != nil && j.Spec.Review.Decides {
			// The store completed the batch itself (the aggregator): a deciding review of
			// another job handled meanwhile may have been stored after the completion's
			// fold read its job and have read the header before the completion was on it,
			// so neither folded it in. Folding again now, as that review would have,
			// catches it; a completion that folded every review in is left as it is.
			res.Revise = true
		}
	}
	if res.Revise {
		c, announce, err := r.revise(ctx, in.Event, l.tenant, l.batch)
		if err != nil {
			return Applied{}, err
		}
		out.Revised = c
		out.Publish = append(out.Publish, announce...)
	}
	for _, rin := range res.Release {
		// The inputs this job held for its batch's other claiming jobs, each applied to
		// its own job now. A failure leaves this input to be applied again, and the final
		// job releases them again then.
		sub, err := r.Apply(ctx, rin)
		if err == nil && sub.NotRecorded {
			err = fmt.Errorf("%s %s: job %s is not recorded", rin.Event.Type, rin.Event.ID, rin.Event.JobID)
		}
		if err != nil {
			again, skip := AfterRelease(rin, err)
			if (skip || again != nil) && r.Log != nil {
				r.Log.WarnContext(ctx, "a held input failed at its release", "job", rin.Event.JobID, "event", rin.Event.ID, "dropped", skip, "err", err)
			}
			if skip {
				continue
			}
			if again != nil {
				sub, err = r.Apply(ctx, *again)
			}
		}
		if err != nil {
			return Applied{}, fmt.Errorf("release %s %s held by job %s: %w", rin.Event.Type, rin.Event.ID, records.JobKey(l.tenant, l.batch, l.id), err)
		}
		// What a released input changes is the release's to publish; an input its job
		// applied before announces nothing new, unless the store wants it said again.
		if sub.Job != nil || r.Reannounce {
			out.Publish = append(out.Publish, sub.Publish...)
		}
		if sub.Complete != nil {
			out.Complete = sub.Complete
		}
	}
	return out, nil
}

// load reads the job and, for a looping job, its own state and its batch's claim when
// the rules read them for ev (NeedsState).
func (r *Runner) load(ctx context.Context, tenant, batch, job string, ev events.Event) (loaded, error) {
	l := loaded{st: State{Now: r.now()}, tenant: tenant, batch: batch, id: job}
	j, rev, err := r.Store.Job(ctx, tenant, batch, job)
	if err != nil || j == nil {
		return l, err
	}
	l.st.Job, l.jobRev = j, rev
	lk, looping := kind.LoopingOf(j.Spec.Kind)
	if !looping || !NeedsState(j, ev) {
		return l, nil
	}
	l.looping = lk
	if l.stateKey = lk.StateKey(tenant, j.Spec); l.stateKey != "" {
		stored, srev, err := r.Store.State(ctx, l.stateKey)
		if err != nil {
			return l, err
		}
		var docs [][]byte
		for _, b := range lk.StateDocuments(j.Spec) {
			d, err := r.Store.Document(ctx, tenant, b)
			if err != nil {
				return l, fmt.Errorf("job %s: %w", j.Key(), err)
			}
			docs = append(docs, d)
		}
		if l.st.KindState, err = lk.LoadState(j.Spec, stored, docs); err != nil {
			return l, fmt.Errorf("job %s: %w", j.Key(), err)
		}
		l.stateRev = srev
	}
	if lk.Claiming(j.Spec) {
		if l.st.Claim, err = r.Store.Claim(ctx, tenant, batch); err != nil {
			return l, err
		}
		if l.st.Holder, err = r.holder(ctx, j, l.st.Claim); err != nil {
			return l, err
		}
	}
	return l, nil
}

// holder loads the record of the job holding the batch's claim when the rules read it
// for an input of j (NeedsHolder).
func (r *Runner) holder(ctx context.Context, j *records.Job, claim string) (*records.Job, error) {
	if !NeedsHolder(j, claim) {
		return nil, nil
	}
	h, _, err := r.Store.Job(ctx, j.Tenant, j.Batch, claim)
	return h, err
}

// park holds an input on the record of the job holding the batch's claim, by
// compare-and-set (Park). It reports false when the holder has its outcome by now, so
// the input is to be decided instead.
func (r *Runner) park(ctx context.Context, tenant, batch, holder string, in Input) (bool, error) {
	for attempt := 0; ; attempt++ {
		h, rev, err := r.Store.Job(ctx, tenant, batch, holder)
		if err == nil && h == nil {
			err = errors.New("not recorded")
		}
		if err != nil {
			return false, fmt.Errorf("hold %s %s on job %s: %w", in.Event.Type, in.Event.ID, records.JobKey(tenant, batch, holder), err)
		}
		next, ok, err := Park(h, in)
		if err != nil || !ok || next == nil {
			return ok, err
		}
		stored, err := r.Store.PutJob(ctx, next, rev)
		switch {
		case err != nil:
			return false, err
		case stored:
			if r.Log != nil {
				r.Log.InfoContext(ctx, "held for the claim", "tenant", tenant, "batch", batch, "holder", holder, "event", in.Event.Type, "job", in.Event.JobID)
			}
			return true, nil
		case attempt >= maxConflicts:
			return false, fmt.Errorf("hold on job %s: still conflicting after %d attempts", records.JobKey(tenant, batch, holder), attempt)
		}
	}
}

// store writes what the rules decided: the job's own state, then the job (a new one
// with its batch's header). It reports false on a conflict (someone else wrote first).
func (r *Runner) store(ctx context.Context, l loaded, res Result) (bool, error) {
	if res.KindState != nil {
		key := l.stateKey
		if key == "" {
			return false, fmt.Errorf("job %s: a state to store and no key to store it under", l.st.Job.Key())
		}
		data, err := res.KindState.Encode()
		if err != nil {
			return false, fmt.Errorf("job %s: encode its state: %w", l.st.Job.Key(), err)
		}
		if ok, err := r.Store.PutState(ctx, key, data, l.stateRev); err != nil || !ok {
			return ok, err
		}
	}
	switch {
	case res.Job == nil:
		return true, nil
	case res.Created:
		// Someone recorded the job first: decide again on what they stored.
		return r.Store.CreateJob(ctx, res.Job, res.Batch)
	}
	return r.Store.PutJob(ctx, res.Job, l.jobRev)
}

// applyBatch runs the rules of a batch-wide input (batch.opened, a cancel step) on the
// batch's header by compare-and-set, loading the plan page a cancel step reads. The plan
// never changes once recorded, so a page loaded for one attempt serves a retried one.
func (r *Runner) applyBatch(ctx context.Context, in Input) (Applied, error) {
	ev := in.Event
	now := r.now()
	var page *records.PlanPage
	for {
		var res BatchResult
		var ruleErr error
		if err := r.Store.UpdateHeader(ctx, ev.Tenant, ev.BatchID, func(cur *records.Batch) *records.Batch {
			res, ruleErr = ApplyBatch(BatchState{Header: cur, Page: page, Now: now}, in)
			if ruleErr != nil {
				return nil
			}
			return res.Header
		}); err != nil {
			return Applied{}, err
		}
		switch {
		case ruleErr != nil:
			return Applied{}, ruleErr
		case res.NotRecorded:
			return Applied{Result: Result{NotRecorded: true}}, nil
		case res.NeedPage != nil:
			p, err := r.Store.PlanPage(ctx, ev.Tenant, *res.NeedPage)
			if err != nil {
				return Applied{}, fmt.Errorf("batch %s: %w", records.BatchKey(ev.Tenant, ev.BatchID), err)
			}
			page = p
			continue
		}
		return Applied{Result: Result{Publish: res.Publish}}, nil
	}
}

// revise folds a completed batch again after a person's review (ev) decided one of its
// outcomes, with the fold that completed it (Fold), and replaces its completion and
// manifests by compare-and-set on its header: the header is read, the jobs folded and the
// new completion stored over the revision read, so a concurrent review of another job
// either was folded in or makes this write lose, and it folds again. A batch not complete
// yet folds the review in when it completes; one whose redrive is under way, when the
// redrive completes. A completion the fold leaves as it is is not written again, so a
// redelivered review revises nothing twice. The completion keeps who completed it and the
// attempt, and what it announced when the batch finished (records.Completion.Announced);
// it says it was revised and by which review (records.Revision).
//
// It returns the revision's announcement (RevisionEvents) whether this call stored the
// revision or found it stored already: the store comes before the publish, so a review
// redelivered because its publish failed finds its revision stored, and only announcing
// it again then (under the same ids) gets it into the stream.
func (r *Runner) revise(ctx context.Context, ev events.Event, tenant, batch string) (*Completed, []events.Event, error) {
	key := records.BatchKey(tenant, batch)
	for attempt := 0; ; attempt++ {
		h, rev, err := r.Store.Header(ctx, tenant, batch)
		if err != nil {
			return nil, nil, fmt.Errorf("revise batch %s after review %s: %w", key, ev.ID, err)
		}
		if h == nil || h.Completion == nil || h.Redrive != nil && len(h.Redrive.Pending) > 0 {
			return nil, nil, nil
		}
		cur := h.Completion
		f := NewFold(tenant, batch)
		if cur.Index != nil {
			f.KeepIndex()
		}
		if err := r.Store.EachJob(ctx, tenant, batch, func(j *records.Job) error {
			f.Add(j)
			return nil
		}); err != nil {
			return nil, nil, fmt.Errorf("revise batch %s after review %s: %w", key, ev.ID, err)
		}
		c, err := f.Complete(cur.By, cur.Attempt)
		if err != nil {
			return nil, nil, fmt.Errorf("revise batch %s after review %s: %w", key, ev.ID, err)
		}
		if c.Completion.Revised = f.Revision(); c.Completion.Revised == nil {
			return nil, nil, nil // no outcome of the batch is a person's
		}
		c.Completion.Announced = cur.Announced
		if c.Completion.Announced == nil && cur.Revised == nil && cur.Summary.Total > 0 {
			// The completion as the batch finished it is what was announced. A store that
			// keeps no more of a completion than who made it (Memory, whose caller folds
			// it) leaves this to its caller.
			c.Completion.Announced = &records.Announcement{Summary: cur.Summary, Manifests: cur.Manifests, Digest: cur.Digest}
		}
		if same, err := sameCompletion(cur, &c.Completion); err != nil || same {
			if err != nil {
				return nil, nil, err
			}
			return nil, RevisionEvents(tenant, batch, cur), nil
		}
		if err := r.Store.PutCompleted(ctx, tenant, batch, &c); err != nil {
			return nil, nil, fmt.Errorf("revise batch %s after review %s: %w", key, ev.ID, err)
		}
		next := *h
		next.Completion = &c.Completion
		stored, err := r.Store.PutHeader(ctx, &next, rev)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("revise batch %s after review %s: %w", key, ev.ID, err)
		case stored:
			if r.Log != nil {
				r.Log.InfoContext(ctx, "completion revised by a review", "tenant", tenant, "batch", batch, "review", ev.ID,
					"exit_code", c.Completion.Summary.ExitCode, "reviews", c.Completion.Revised.Reviews)
			}
			return &c, RevisionEvents(tenant, batch, &c.Completion), nil
		case attempt >= maxConflicts:
			return nil, nil, fmt.Errorf("revise batch %s after review %s: still conflicting after %d attempts", key, ev.ID, attempt)
		}
	}
}

// completes reports whether evs announce a batch's completion.
func completes(evs []events.Event) bool {
	for _, e := range evs {
		if _, ok := e.Payload.(*events.BatchCompleted); ok {
			return true
		}
	}
	return false
}

// sameCompletion reports whether two completions record the same thing. Their indexes
// are left out: an index holds its entries in the order the fold read the records (a
// key-value watch's, which changes as records are written) and its contents are those of
// the records the rest of the completion is folded from. So are what they say of their
// revision and first announcement: a fold that changes no outcome, manifest or digest is
// no revision (a completion that folded in the reviews decided before it).
func sameCompletion(a, b *records.Completion) (bool, error) {
	ac, bc := *a, *b
	ac.Index, bc.Index = nil, nil
	ac.Revised, bc.Revised, ac.Announced, bc.Announced = nil, nil, nil, nil
	x, err := json.Marshal(&ac)
	if err != nil {
		return false, fmt.Errorf("encode a completion: %w", err)
	}
	y, err := json.Marshal(&bc)
	if err != nil {
		return false, fmt.Errorf("encode a completion: %w", err)
	}
	return bytes.Equal(x, y), nil
}
