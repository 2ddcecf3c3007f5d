// Package aggregator is the aggregator service: it loads what the rules (pkg/rulebook)
// read for an event, runs them, and stores and publishes what they decide. Every write is
// a compare-and-set on the records bucket (pkg/records), so several aggregator instances
// can share its consumer; a conflict reloads and decides again.
package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// maxConflicts bounds how often one event is decided again after a concurrent write.
const maxConflicts = 50

// maxKnownHeaders bounds the batch headers an instance remembers as stored.
const maxKnownHeaders = 4096

// Service aggregates verdicts.
type Service struct {
	records records.Store
	views   kv.KV
	// cache is the judge-call cache bucket, where each tenant's flip history lives.
	cache kv.KV
	blobs blob.Store
	log   *slog.Logger
	now   func() time.Time
	// headers remembers the batch headers this instance has stored or seen stored, so
	// that the jobs of a batch after its first skip the create-if-absent of its header:
	// a create that finds the key costs two round trips and changes nothing.
	headers     sync.Map
	headerCount atomic.Int64
}

// New builds the aggregator over its buckets and the blob store it writes manifests to.
func New(b bus.Buckets, store blob.Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{records: records.New(b), views: b.Views, cache: b.Cache, blobs: store, log: log.With("service", bus.Aggregator),
		now: func() time.Time { return time.Now().UTC() }}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	in := rulebook.Input{Event: ev, Link: inputLink(ctx, ev)}
	if rulebook.BatchWide(ev) {
		return s.applyBatch(ctx, in)
	}
	return s.apply(ctx, in)
}

// applyBatch runs the rules of a batch-wide input (batch.opened, a cancel step) on the
// batch header by compare-and-set, loading the plan page a cancel step reads. The plan
// never changes once recorded, so a page loaded for one attempt serves a retried one.
func (s *Service) applyBatch(ctx context.Context, in rulebook.Input) ([]events.Event, error) {
	ev := in.Event
	now := s.now()
	var page *records.PlanPage
	for {
		var res rulebook.BatchResult
		var ruleErr error
		if _, err := s.records.UpdateHeader(ctx, ev.Tenant, ev.BatchID, func(cur *records.Batch) *records.Batch {
			res, ruleErr = rulebook.ApplyBatch(rulebook.BatchState{Header: cur, Page: page, Now: now}, in)
			if ruleErr != nil {
				return nil
			}
			return res.Header
		}); err != nil {
			return nil, err
		}
		if res.Header != nil {
			s.knowHeader(records.BatchKey(ev.Tenant, ev.BatchID))
		}
		switch {
		case errors.Is(ruleErr, rulebook.ErrRefused):
			return nil, bus.Permanent(ruleErr)
		case ruleErr != nil:
			return nil, ruleErr
		case res.NotRecorded:
			return nil, fmt.Errorf("%s %s: batch %s has no plan recorded yet: %w", ev.Type, ev.ID, records.BatchKey(ev.Tenant, ev.BatchID), errNotRecorded)
		case res.NeedPage != nil:
			p, err := records.LoadPlanPage(ctx, s.blobs, ev.Tenant, *res.NeedPage)
			if errors.Is(err, records.ErrCorrupt) {
				return nil, bus.Permanent(fmt.Errorf("batch %s: %w", records.BatchKey(ev.Tenant, ev.BatchID), err))
			}
			if err != nil {
				return nil, fmt.Errorf("batch %s: %w", records.BatchKey(ev.Tenant, ev.BatchID), err)
			}
			page = p
			continue
		}
		if c, ok := ev.Payload.(*events.BatchCancelRequested); ok {
			s.log.InfoContext(ctx, "batch cancel", "tenant", ev.Tenant, "batch", ev.BatchID, "by", c.By, "page", c.Page, "events", len(res.Publish))
		}
		return res.Publish, nil
	}
}

// DeadLetter turns an event another service gave up on into a blocked job, so the AC is
// reported with the reason instead of keeping its batch open forever. A dead letter acts
// only for the tenant and type of the subject its event was published on, and only on a
// job that was submitted; anything else is logged and dropped.
func (s *Service) DeadLetter(ctx context.Context, dl bus.DeadLetter) ([]events.Event, error) {
	ev, err := events.Decode(dl.Payload)
	if err != nil || ev.JobID == "" {
		s.log.WarnContext(ctx, "dead letter names no job", "service", dl.Service, "reason", dl.Reason)
		telemetry.Refused(bus.Aggregator, RefusedNoJob)
		return nil, nil
	}
	out, err := s.apply(ctx, rulebook.Input{Event: ev, Link: inputLink(ctx, ev), Subject: dl.Subject,
		DeadLetter: &rulebook.DeadLetter{Service: dl.Service, Reason: dl.Reason}})
	switch {
	case errors.Is(err, rulebook.ErrRefused):
		// Counted by apply.
		s.log.WarnContext(ctx, "dead letter refused", "service", dl.Service, "subject", dl.Subject, "err", err)
		return nil, nil
	case errors.Is(err, errNotRecorded):
		s.log.WarnContext(ctx, "dead letter for a job never submitted", "service", dl.Service, "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", dl.Reason)
		telemetry.Refused(bus.Aggregator, RefusedNotSubmitted)
		return nil, nil
	}
	return out, err
}

// Reasons the aggregator drops a dead letter, besides the rules' (rulebook.Refusal): fixed
// words, the label of tribunal_refusals_total.
const (
	// RefusedNoJob: a dead letter that does not decode or names no job.
	RefusedNoJob = "no_job"
	// RefusedNotSubmitted: a dead letter for a job that was never submitted.
	RefusedNotSubmitted = "not_submitted"
)

// errNotRecorded is a retryable condition: an event whose job is not recorded yet.
var errNotRecorded = errors.New("job not recorded yet")

// apply loads what the rules read, runs them and stores what they decide, by
// compare-and-set: on a conflict everything is loaded and decided again.
func (s *Service) apply(ctx context.Context, in rulebook.Input) ([]events.Event, error) {
	tenant, batch, job := rulebook.JobOf(in.Event)
	_, submission := in.Event.Payload.(*events.JobSubmitted)
	for attempt := 0; ; attempt++ {
		// A submission is nearly always of a job not recorded yet: decide on no record
		// and let the create-if-absent tell otherwise, which reloads and decides again.
		st, rev, viewRev := rulebook.State{Now: s.now()}, uint64(0), uint64(0)
		var err error
		if !submission || attempt > 0 {
			if st, rev, viewRev, err = s.load(ctx, tenant, batch, job, in.Event); err != nil {
				return nil, err
			}
		}
		res, err := rulebook.Apply(st, in)
		if res.WantsClaim && err == nil {
			if st.Claim, err = s.records.ClaimSpotcheck(ctx, tenant, batch, job); err != nil {
				return nil, err
			}
			if st.Holder, err = s.holder(ctx, st.Job, st.Claim); err != nil {
				return nil, err
			}
			res, err = rulebook.Apply(st, in)
		}
		if err != nil {
			if reason := rulebook.RefusalReason(err); reason != "" {
				telemetry.Refused(bus.Aggregator, reason)
				return nil, bus.Permanent(err)
			}
			return nil, err
		}
		if res.NotRecorded {
			return nil, fmt.Errorf("%s %s: job %s: %w", in.Event.Type, in.Event.ID, records.JobKey(tenant, batch, job), errNotRecorded)
		}
		if res.Hold {
			parked, err := s.park(ctx, tenant, batch, st.Claim, in)
			if err != nil || parked {
				return nil, err
			}
			// The spot-check was answered meanwhile: decide it after all.
			continue
		}
		stored, err := s.store(ctx, st, rev, viewRev, res)
		if err != nil {
			return nil, err
		}
		if !stored {
			if attempt >= maxConflicts {
				return nil, fmt.Errorf("job %s: still conflicting after %d attempts", records.JobKey(tenant, batch, job), attempt)
			}
			continue
		}
		if res.Job != nil {
			telemetry.JudgeDisagreements(res.Job.Spec.Kind, res.Decided)
		}
		out := res.Publish
		if res.Done {
			more, err := s.done(ctx, firstNonNil(res.Job, st.Job))
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		for _, rin := range res.Release {
			// The inputs this job held for the batch's other views (HE-2), each applied to
			// its own job now. A failure leaves this input to be delivered again, and the
			// final job releases them again then.
			more, err := s.apply(ctx, rin)
			if err != nil {
				again, skip := rulebook.AfterRelease(rin, err)
				if skip || again != nil {
					s.log.WarnContext(ctx, "a held input failed at its release", "job", rin.Event.JobID, "event", rin.Event.ID, "dropped", skip, "err", err)
				}
				if skip {
					continue
				}
				if again != nil {
					more, err = s.apply(ctx, *again)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("release %s %s held by job %s: %w", rin.Event.Type, rin.Event.ID, records.JobKey(tenant, batch, job), err)
			}
			out = append(out, more...)
		}
		return out, nil
	}
}

// holder loads the record of the job holding the batch's claim when the rules read it
// for an input of j (rulebook.NeedsHolder).
func (s *Service) holder(ctx context.Context, j *records.Job, claim string) (*records.Job, error) {
	if !rulebook.NeedsHolder(j, claim) {
		return nil, nil
	}
	h, _, err := s.records.Job(ctx, j.Tenant, j.Batch, claim)
	if errors.Is(err, records.ErrCorrupt) {
		return nil, bus.Permanent(err)
	}
	return h, err
}

// park holds an input on the record of the job holding the batch's spot-check, by
// compare-and-set (rulebook.Park). It reports false when the holder has its outcome by
// now, so the input is to be decided instead.
func (s *Service) park(ctx context.Context, tenant, batch, holder string, in rulebook.Input) (bool, error) {
	for attempt := 0; ; attempt++ {
		h, rev, err := s.records.Job(ctx, tenant, batch, holder)
		if err != nil {
			return false, fmt.Errorf("hold %s %s on job %s: %w", in.Event.Type, in.Event.ID, records.JobKey(tenant, batch, holder), err)
		}
		next, ok, err := rulebook.Park(h, in)
		if err != nil || !ok || next == nil {
			return ok, err
		}
		err = s.records.PutJob(ctx, next, rev)
		switch {
		case err == nil:
			s.log.InfoContext(ctx, "held for the spot-check", "tenant", tenant, "batch", batch, "holder", holder, "event", in.Event.Type, "job", in.Event.JobID)
			return true, nil
		case !kv.IsConflict(err):
			return false, err
		case attempt >= maxConflicts:
			return false, fmt.Errorf("hold on job %s: still conflicting after %d attempts", records.JobKey(tenant, batch, holder), attempt)
		}
	}
}

func firstNonNil(a, b *records.Job) *records.Job {
	if a != nil {
		return a
	}
	return b
}

// load reads the job and, for a looping job, its own state and the batch's claim when
// the rules read them for ev (rulebook.NeedsState).
func (s *Service) load(ctx context.Context, tenant, batch, job string, ev events.Event) (rulebook.State, uint64, uint64, error) {
	st := rulebook.State{Now: s.now()}
	j, rev, err := s.records.Job(ctx, tenant, batch, job)
	switch {
	case errors.Is(err, records.ErrNotRecorded):
		return st, 0, 0, nil
	case errors.Is(err, records.ErrCorrupt):
		return st, 0, 0, bus.Permanent(err)
	case err != nil:
		return st, 0, 0, err
	}
	st.Job = j
	lk, looping := kind.LoopingOf(j.Spec.Kind)
	if !looping || !rulebook.NeedsState(j, ev) {
		return st, rev, 0, nil
	}
	var viewRev uint64
	if key := lk.StateKey(tenant, j.Spec); key != "" {
		if s.views == nil {
			return st, 0, 0, fmt.Errorf("job %s: no views bucket for a %s view", j.Key(), j.Spec.Kind)
		}
		var stored []byte
		e, err := s.views.Get(ctx, key)
		switch {
		case err == nil:
			stored, viewRev = e.Value(), e.Revision()
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return st, 0, 0, fmt.Errorf("load view %s: %w", key, err)
		}
		var docs [][]byte
		for _, b := range lk.StateDocuments(j.Spec) {
			d, _, err := blob.ReadAll(ctx, s.blobs, blob.Ref{Tenant: tenant, SHA256: b.SHA256})
			if err != nil {
				return st, 0, 0, fmt.Errorf("job %s: read %s: %w", j.Key(), b.SHA256, err)
			}
			docs = append(docs, d)
		}
		if st.KindState, err = lk.LoadState(j.Spec, stored, docs); err != nil {
			return st, 0, 0, err
		}
	}
	if lk.Claiming(j.Spec) {
		if st.Claim, err = s.records.Spotcheck(ctx, tenant, batch); err != nil {
			return st, 0, 0, err
		}
		if st.Holder, err = s.holder(ctx, j, st.Claim); err != nil {
			return st, 0, 0, err
		}
	}
	return st, rev, viewRev, nil
}

// knowHeader remembers that a batch's header is stored, so its later jobs skip creating
// it; the memory is bounded by forgetting everything past maxKnownHeaders.
func (s *Service) knowHeader(key string) {
	if _, known := s.headers.Load(key); known {
		return
	}
	if s.headerCount.Add(1) > maxKnownHeaders {
		s.headers.Clear()
		s.headerCount.Store(0)
	}
	s.headers.Store(key, struct{}{})
}

// store writes what the rules decided: the batch header a new job starts, the view, then
// the job. It reports false on a conflict (someone else wrote first).
func (s *Service) store(ctx context.Context, st rulebook.State, rev, viewRev uint64, res rulebook.Result) (bool, error) {
	if res.Batch != nil {
		key := records.BatchKey(res.Batch.Tenant, res.Batch.Batch)
		if _, known := s.headers.Load(key); !known {
			if err := s.records.EnsureHeader(ctx, *res.Batch); err != nil {
				return false, err
			}
			s.knowHeader(key)
		}
	}
	if res.KindState != nil {
		key := stateKey(st.Job)
		data, err := res.KindState.Encode()
		if err != nil {
			return false, fmt.Errorf("encode view %s: %w", key, err)
		}
		if err := kv.CompareAndSet(ctx, s.views, key, data, viewRev); err != nil {
			if kv.IsConflict(err) {
				return false, nil
			}
			return false, fmt.Errorf("store view %s: %w", key, err)
		}
	}
	if res.Job == nil {
		return true, nil
	}
	if res.Created {
		// Someone recorded the job first: decide again on what they stored.
		return s.records.CreateJob(ctx, res.Job)
	}
	if err := s.records.PutJob(ctx, res.Job, rev); err != nil {
		if kv.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func stateKey(j *records.Job) string {
	lk, _ := kind.LoopingOf(j.Spec.Kind)
	return lk.StateKey(j.Tenant, j.Spec)
}

// inputLink is one link of a job's digest chain: the event and its wire bytes' hash.
func inputLink(ctx context.Context, ev events.Event) string {
	d := bus.PayloadDigest(ctx)
	if d == "" {
		return ""
	}
	return ev.ID + ":" + d
}
