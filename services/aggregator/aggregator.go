// Package aggregator is the aggregator service: it runs the rules' runner
// (rulebook.Runner: load, apply, store by compare-and-set, decide again on a conflict)
// over its key-value buckets and blob store, and publishes what the rules decide. Every
// write is a compare-and-set on the records bucket (pkg/records), so several aggregator
// instances can share its consumer. The audit runs the same runner over memory.
package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

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
	// staleLeft counts down the inputs the deliberately broken build still fails after
	// a cut (staleDecide); always 0 in a real build.
	staleLeft atomic.Int64
	// runner applies inputs to the buckets (store) with the rules.
	runner rulebook.Runner
}

// New builds the aggregator over its buckets and the blob store it writes manifests to.
func New(b bus.Buckets, store blob.Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{records: records.New(b), views: b.Views, cache: b.Cache, blobs: store, log: log.With("service", bus.Aggregator),
		now: func() time.Time { return time.Now().UTC() }}
	s.runner = rulebook.Runner{Store: buckets{s}, Now: func() time.Time { return s.now() }, Reannounce: true, Log: s.log,
		Refused: func(reason string) { telemetry.Refused(bus.Aggregator, reason) },
		Stored: func(res rulebook.Result) {
			if res.Job != nil {
				telemetry.JudgeDisagreements(res.Job.Spec.Kind, res.Decided)
			}
		}}
	return s
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	in := rulebook.Input{Event: ev, Link: inputLink(ctx, ev)}
	in.Seq, in.ChainSeqs = bus.Position(ctx)
	var out []events.Event
	var err error
	if rulebook.BatchWide(ev) {
		out, err = s.applyBatch(ctx, in)
	} else {
		out, err = s.apply(ctx, in)
	}
	if staleDecisions {
		return s.staleDecide(ctx, ev, out, err)
	}
	return out, err
}

// staleDecide is the deliberately broken build's handling (see stale_broken.go): a
// handler whose store did not answer marks this instance cut off, and the next
// staleAfterCut inputs it handles once the store answers again are failed for good, as
// if decided on the view it held while cut off. It is keyed on the cut having happened,
// not on its timing, so the partition test meets it on every run in which an aggregator
// held work across a cut.
func (s *Service) staleDecide(ctx context.Context, ev events.Event, out []events.Event, err error) ([]events.Event, error) {
	if err != nil {
		if bus.IsTransient(err) {
			s.staleLeft.Store(staleAfterCut)
		}
		return out, err
	}
	for n := s.staleLeft.Load(); n > 0; n = s.staleLeft.Load() {
		if s.staleLeft.CompareAndSwap(n, n-1) {
			s.log.WarnContext(ctx, "chaosbroken: decided on what it held while cut off", "event", ev.ID, "job", ev.JobID)
			return nil, bus.Permanent(fmt.Errorf("chaosbroken: decided on what it held while cut off"))
		}
	}
	return out, nil
}

// staleAfterCut is how many inputs the broken build fails after a cut: more than one,
// so that one landing on a job already final (which a dead letter cannot block) still
// leaves others that block theirs.
const staleAfterCut = 5

// applyBatch runs the rules of a batch-wide input (batch.opened, a cancel step) on the
// batch header (rulebook.Runner).
func (s *Service) applyBatch(ctx context.Context, in rulebook.Input) ([]events.Event, error) {
	ev := in.Event
	res, err := s.runner.Apply(ctx, in)
	switch {
	case errors.Is(err, rulebook.ErrRefused):
		return nil, bus.Permanent(err)
	case err != nil:
		return nil, err
	case res.NotRecorded:
		return nil, fmt.Errorf("%s %s: batch %s has no plan recorded yet: %w", ev.Type, ev.ID, records.BatchKey(ev.Tenant, ev.BatchID), errNotRecorded)
	}
	if c, ok := ev.Payload.(*events.BatchCancelRequested); ok {
		s.log.InfoContext(ctx, "batch cancel", "tenant", ev.Tenant, "batch", ev.BatchID, "by", c.By, "page", c.Page, "events", len(res.Publish))
	}
	return res.Publish, nil
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
	in := rulebook.Input{Event: ev, Link: inputLink(ctx, ev), Subject: dl.Subject,
		DeadLetter: &rulebook.DeadLetter{Service: dl.Service, Reason: dl.Reason}}
	in.Seq, in.ChainSeqs = bus.Position(ctx)
	out, err := s.apply(ctx, in)
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

// apply applies a job's input with the runner, which loads what the rules read, runs
// them and stores what they decide, by compare-and-set: on a conflict everything is loaded
// and decided again. An input the rules refuse with a reason can never succeed and is
// not retried (nor is one whose record does not decode: the store says so).
func (s *Service) apply(ctx context.Context, in rulebook.Input) ([]events.Event, error) {
	res, err := s.runner.Apply(ctx, in)
	switch {
	case rulebook.RefusalReason(err) != "":
		return nil, bus.Permanent(err)
	case err != nil:
		return nil, err
	case res.NotRecorded:
		tenant, batch, job := rulebook.JobOf(in.Event)
		return nil, fmt.Errorf("%s %s: job %s: %w", in.Event.Type, in.Event.ID, records.JobKey(tenant, batch, job), errNotRecorded)
	}
	return res.Publish, nil
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

// inputLink is one link of a job's digest chain: the event and its wire bytes' hash.
func inputLink(ctx context.Context, ev events.Event) string {
	d := bus.PayloadDigest(ctx)
	if d == "" {
		return ""
	}
	return ev.ID + ":" + d
}
