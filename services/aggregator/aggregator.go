// Package aggregator is the aggregator service: it records jobs, re-derives every verdict
// from the judges' raw answers (package aggregate), records blocked jobs, tells when a
// batch is complete and writes its manifest. Its state lives in JetStream KV and every
// update is a compare-and-set, so several aggregator instances can share its consumer.
package aggregator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/aggregate"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/critic"
	"github.com/tribunal-dev/tribunal/pkg/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service aggregates verdicts.
type Service struct {
	jobs    jetstream.KeyValue
	batches jetstream.KeyValue
	views   jetstream.KeyValue
	store   blob.Store
	log     *slog.Logger
	now     func() time.Time
}

// New builds the aggregator.
func New(b bus.Buckets, store blob.Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{jobs: b.Jobs, batches: b.Batches, views: b.Views, store: store, log: log.With("service", bus.Aggregator), now: func() time.Time { return time.Now().UTC() }}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	if ev.Rejudge != "" {
		// A rejudge's verdicts stand next to the original ones in the stream for the
		// rejudging client to read; they never change a decision.
		return nil, nil
	}
	switch p := ev.Payload.(type) {
	case *events.JobSubmitted:
		return nil, s.submitted(ctx, ev, p)
	case *events.RenderUnchanged:
		return s.rubricStep(ctx, ev, loopStep{unchanged: true, render: &p.Render})
	case *events.SpotcheckRecorded:
		return s.spotcheck(ctx, ev, p)
	case *events.GatesFailed:
		if p.Kind == events.KindRubric && p.Blocked == "" {
			if p.NeedsContext != "" {
				return s.decide(ctx, ev, func(r *JobRecord) {
					r.Status, r.BlockStage, r.BlockReason = StatusNeedsContext, "reference", p.NeedsContext
					r.Rubric = &RubricRecord{Candidate: p.Candidate}
				})
			}
			var failing []string
			for _, g := range p.Gates {
				if g.Status == "fail" {
					failing = append(failing, g.Name)
				}
			}
			return s.rubricStep(ctx, ev, loopStep{gates: failing})
		}
		return s.decide(ctx, ev, func(r *JobRecord) {
			r.Status, r.BlockStage = StatusBlocked, "gate"
			if p.Blocked != "" {
				r.BlockStage, r.BlockReason = "render", p.Blocked
			} else {
				r.BlockReason = failedGates(p.Gates)
			}
			if r.Spec.Kind == events.KindAB {
				c := ab.Blocked(r.ACID, aggregate.Pair(r.Spec), ab.Assign(r.ACID, r.Iteration), r.BlockReason)
				r.Comparison = &c
			}
		})
	case *events.VerdictEmitted:
		switch p.Kind {
		case events.KindCritic:
			return s.decide(ctx, ev, func(r *JobRecord) {
				d := aggregate.DeriveCritic(r.Spec, p.Critic)
				r.Status, r.Critic, r.Decided = d.Status, &d.Result, d.Decided
				r.Judges = d.Decided.Judges
				if d.Blocked != "" {
					r.BlockStage, r.BlockReason = "judge", d.Blocked
				}
			})
		case events.KindRubric:
			return s.rubricVote(ctx, ev, p.Rubric)
		case events.KindEquivalence:
			return s.decide(ctx, ev, func(r *JobRecord) {
				d := aggregate.DeriveEquivalence(r.Spec, p.Cases)
				r.Status, r.Equivalence, r.Decided = d.Status, &d.Report, d.Decided
				r.Transcripts = nil
				for _, c := range p.Cases {
					if c.Original != nil && c.Candidate != nil {
						r.Transcripts = append(r.Transcripts, events.Transcript{CaseID: c.CaseID, Side: "original", Blob: *c.Original},
							events.Transcript{CaseID: c.CaseID, Side: "candidate", Blob: *c.Candidate})
					}
				}
				r.Judges = d.Decided.Judges
				if d.Blocked != "" {
					r.BlockStage, r.BlockReason = "judge", d.Blocked
				}
			})
		}
		return s.decide(ctx, ev, func(r *JobRecord) {
			d := aggregate.DeriveAB(r.Spec, ev.Iteration, p.Votes)
			r.Votes, r.Comparison, r.Decided = p.Votes, &d.Comparison, d.Decided
			if d.Decided != nil {
				r.Judges = d.Decided.Judges
			}
			switch {
			case d.Blocked != "":
				r.Status, r.BlockStage, r.BlockReason = StatusBlocked, "judge", d.Blocked
			case d.Decided.Status == string(ab.StatusSchemaViolation):
				r.Status = StatusSchemaViolation
			default:
				r.Status = StatusCompared
			}
		})
	}
	return nil, bus.Permanent(fmt.Errorf("aggregator got %s", ev.Type))
}

// DeadLetter turns an event another service gave up on into a blocked job, so the AC is
// reported with the reason instead of keeping its batch open forever. Dead letters that
// name no job (undecodable bytes) are only logged: nothing can be attributed to them.
func (s *Service) DeadLetter(ctx context.Context, payload []byte, reason, service string) ([]events.Event, error) {
	ev, err := events.Decode(payload)
	if err != nil || ev.JobID == "" {
		s.log.WarnContext(ctx, "dead letter names no job", "service", service, "reason", reason)
		return nil, nil
	}
	if ev.Type == events.TypeJobSubmitted {
		// The job was never recorded: record it first so it can be blocked.
		if p, ok := ev.Payload.(*events.JobSubmitted); ok {
			if err := s.submitted(ctx, ev, p); err != nil {
				return nil, err
			}
		}
	}
	out, err := s.decide(ctx, ev, func(r *JobRecord) {
		r.Status, r.BlockStage = StatusBlocked, service
		r.BlockReason = fmt.Sprintf("%s gave up on %s: %s", service, ev.Type, reason)
		if r.Spec.Kind == events.KindAB {
			c := ab.Blocked(r.ACID, aggregate.Pair(r.Spec), ab.Assign(r.ACID, r.Iteration), r.BlockReason)
			r.Comparison = &c
		}
	})
	if errors.Is(err, errNotRecorded) {
		s.log.WarnContext(ctx, "dead letter for a job never submitted", "service", service, "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", reason)
		return nil, nil
	}
	return out, err
}

func (s *Service) submitted(ctx context.Context, ev events.Event, p *events.JobSubmitted) error {
	rec := JobRecord{
		Tenant: ev.Tenant, Batch: ev.BatchID, ACID: p.Spec.ACID, Index: p.Index, BatchSize: p.BatchSize,
		BatchSource: p.BatchSource, Spec: p.Spec, Iteration: ev.Iteration, CorrelationID: ev.CorrelationID,
		SubmittedAt: ev.Time, Status: StatusPending, Inputs: inputLink(ctx, ev),
	}
	if p.Spec.ACID != ev.JobID {
		return bus.Permanent(fmt.Errorf("job.submitted %s: spec.ac_id %q differs from envelope job %q", ev.ID, p.Spec.ACID, ev.JobID))
	}
	if err := ensureHeader(ctx, s.batches, BatchHeader{Tenant: ev.Tenant, Batch: ev.BatchID, Size: p.BatchSize, Source: p.BatchSource, CreatedAt: s.now()}); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := s.jobs.Create(ctx, JobKey(ev.Tenant, ev.BatchID, p.Spec.ACID), data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("record job %s: %w", JobKey(ev.Tenant, ev.BatchID, p.Spec.ACID), err)
	}
	return nil
}

// decide makes a pending job final with apply (once, by compare-and-set), then returns
// the job's outputs and, when it completed the batch, the batch's. A job that is already
// final keeps its first outcome: its outputs are re-derived from the record and
// republished under the same ids, which JetStream drops as duplicates.
func (s *Service) decide(ctx context.Context, ev events.Event, apply func(*JobRecord)) ([]events.Event, error) {
	key := JobKey(ev.Tenant, ev.BatchID, ev.JobID)
	stale := false
	rec, err := updateJob(ctx, s.jobs, key, func(r *JobRecord) bool {
		if ev.Attempt < r.Attempt {
			// An event of an earlier attempt, redelivered after a redrive: the job's
			// outcome now belongs to the newer attempt.
			stale = true
			return false
		}
		if r.Final() && !(ev.Attempt > r.Attempt && Redrivable(r)) {
			// Final, and not a redrive of a blocked job: a higher attempt's event for it
			// has nothing to decide and must not re-announce the outcome under new ids.
			stale = ev.Attempt > r.Attempt
			return false
		}
		if ev.Attempt > r.Attempt {
			// A redrive: the blocked outcome of the earlier attempt is replaced.
			r.Attempt, r.Status, r.BlockStage, r.BlockReason = ev.Attempt, StatusPending, "", ""
			r.Decided, r.Comparison, r.Critic, r.Equivalence, r.Votes = nil, nil, nil, nil, nil
		}
		apply(r)
		telemetry.JudgeDisagreements(r.Spec.Kind, r.Decided)
		r.DecidedBy, r.DecidedAt = ev.ID, s.now()
		r.Inputs = append(r.Inputs, inputLink(ctx, ev)...)
		return true
	})
	if err != nil {
		return nil, err
	}
	if stale || !rec.Final() {
		return nil, nil
	}
	out := jobOutputs(rec, &ev.Envelope)
	if rec.Attempt > 0 {
		more, err := s.redriven(ctx, rec)
		if err != nil {
			return nil, err
		}
		return append(out, more...), nil
	}
	complete, err := markDone(ctx, s.batches, rec.Tenant, rec.Batch, rec.Index, rec.BatchSize)
	if err != nil {
		return nil, err
	}
	if complete {
		more, err := s.complete(ctx, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// inputLink is one link of a job's digest chain: the event and its wire bytes' hash.
func inputLink(ctx context.Context, ev events.Event) []string {
	d := bus.PayloadDigest(ctx)
	if d == "" {
		return nil
	}
	return []string{ev.ID + ":" + d}
}

// ChainDigest folds links into one SHA-256 chain: each step hashes the previous digest
// with the next link, so changing, dropping or reordering any event changes the result.
func ChainDigest(links []string) string {
	d := ""
	for _, l := range links {
		sum := sha256.Sum256([]byte(d + "\n" + l))
		d = hex.EncodeToString(sum[:])
	}
	return d
}

// BatchDigest chains every job's inputs in batch order.
func BatchDigest(recs []*JobRecord) string {
	var f Fold
	for _, r := range recs {
		f.Add(r)
	}
	return f.Digest()
}

// jobOutputs are the events a final job record stands for.
func jobOutputs(r *JobRecord, cause *events.Envelope) []events.Event {
	var p events.Payload
	if r.Status == StatusBlocked {
		p = &events.JobBlocked{Kind: r.Spec.Kind, ACID: r.ACID, Stage: r.BlockStage, Reason: r.BlockReason}
	} else if r.Decided != nil {
		p = r.Decided
	} else {
		return nil
	}
	// A rubric view may have published a pending decision at this iteration already
	// (a confirmation); its final outcome needs its own id or it would be dropped as a
	// duplicate of that one.
	step := ""
	if r.Spec.Kind == events.KindRubric {
		step = "final"
	}
	e := events.New(p, r.Tenant, r.Batch, r.ACID, r.Iteration, step, cause)
	e.CorrelationID = r.CorrelationID
	return []events.Event{e}
}

func failedGates(gates []events.Gate) string {
	msg := "gates failed:"
	for _, g := range gates {
		if g.Status == "fail" {
			msg += fmt.Sprintf(" %s (%s)", g.Name, g.Detail)
		}
	}
	return msg
}

// complete writes the manifest of a finished batch and announces it. Only the instance
// whose compare-and-set records the completion returns the announcement; a redelivery to
// that same job republishes it under the same ids.
func (s *Service) complete(ctx context.Context, last *JobRecord) ([]events.Event, error) {
	h, _, err := LoadHeader(ctx, s.batches, last.Tenant, last.Batch)
	if err != nil {
		return nil, err
	}
	if h != nil && h.Completion != nil {
		if h.Completion.By != last.ACID {
			return nil, nil
		}
		return completionEvents(h), nil
	}
	c, err := s.buildCompletion(ctx, last, 0)
	if err != nil {
		return nil, err
	}
	var won bool
	var final BatchHeader
	_, err = casBytes(ctx, s.batches, BatchKey(last.Tenant, last.Batch), func(b []byte) ([]byte, bool) {
		var cur BatchHeader
		if len(b) > 0 {
			if json.Unmarshal(b, &cur) != nil {
				return b, false
			}
		}
		if cur.Completion != nil {
			won = cur.Completion.By == last.ACID
			final = cur
			return b, false
		}
		cur.Completion = c
		won = true
		final = cur
		out, _ := json.Marshal(cur)
		return out, true
	})
	if err != nil {
		return nil, err
	}
	if !won {
		return nil, nil
	}
	h = &final
	s.log.Info("batch complete", "tenant", last.Tenant, "batch", last.Batch, "total", c.Summary.Total,
		"compared", c.Summary.Compared, "blocked", c.Summary.Blocked, "suggestions", c.Summary.Suggestions, "exit_code", c.Summary.ExitCode)
	return completionEvents(h), nil
}

// buildCompletion reads every job of the batch, writes its manifests and returns the
// completion record (not yet stored).
func (s *Service) buildCompletion(ctx context.Context, last *JobRecord, attempt int) (*Completion, error) {
	var f Fold
	if err := EachJob(ctx, s.jobs, last.Tenant, last.Batch, func(r *JobRecord) error { f.Add(r); return nil }); err != nil {
		return nil, err
	}
	summary, manifests := f.Summary(last.Tenant, last.Batch, s.now())
	digest := f.Digest()
	refs := map[string]events.Blob{}
	for _, kind := range []string{events.KindAB, events.KindCritic, events.KindEquivalence, events.KindRubric} {
		m, ok := manifests[kind]
		if !ok {
			continue
		}
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode %s manifest: %w", kind, err)
		}
		attrs, err := blob.PutBytes(ctx, s.store, last.Tenant, data, "application/json")
		if err != nil {
			return nil, fmt.Errorf("store %s manifest of %s: %w", kind, BatchKey(last.Tenant, last.Batch), err)
		}
		ref := events.Blob{SHA256: attrs.Ref.SHA256, MediaType: "application/json", Size: attrs.Size}
		refs[kind] = ref
		summary.Manifests = append(summary.Manifests, ref)
	}
	var ref *events.Blob
	if r, ok := refs[events.KindAB]; ok {
		ref = &r
	}
	return &Completion{At: s.now(), By: last.ACID, Summary: summary, ManifestRef: ref, Manifests: refs, Digest: digest, Attempt: attempt}, nil
}

// Redrivable reports whether `tribunal redrive` may send a job through again: a job that
// ended blocked (a provider outage, a storage failure given up on), outside a rubric loop
// (whose views continue with their next run instead).
func Redrivable(r *JobRecord) bool {
	return r.Status == StatusBlocked && r.Spec.Kind != events.KindRubric
}

// redriven records that a redriven job has its new outcome and, when it is the last of
// its redrive, completes the batch again: new manifests and a new batch.completed, with
// ids of that attempt.
func (s *Service) redriven(ctx context.Context, rec *JobRecord) ([]events.Event, error) {
	var last bool
	_, err := casBytes(ctx, s.batches, BatchKey(rec.Tenant, rec.Batch), func(b []byte) ([]byte, bool) {
		var cur BatchHeader
		if json.Unmarshal(b, &cur) != nil || cur.Redrive == nil || cur.Redrive.Attempt != rec.Attempt {
			return b, false
		}
		if cur.Completion != nil && cur.Completion.Attempt == rec.Attempt {
			last = cur.Completion.By == rec.ACID
			return b, false
		}
		pending := cur.Redrive.Pending[:0:0]
		found := false
		for _, j := range cur.Redrive.Pending {
			if j == rec.ACID {
				found = true
				continue
			}
			pending = append(pending, j)
		}
		if !found {
			return b, false
		}
		cur.Redrive.Pending = pending
		last = len(pending) == 0
		out, _ := json.Marshal(cur)
		return out, true
	})
	if err != nil || !last {
		return nil, err
	}
	h, _, err := LoadHeader(ctx, s.batches, rec.Tenant, rec.Batch)
	if err != nil {
		return nil, err
	}
	if h.Completion != nil && h.Completion.Attempt == rec.Attempt {
		return completionEvents(h), nil
	}
	c, err := s.buildCompletion(ctx, rec, rec.Attempt)
	if err != nil {
		return nil, err
	}
	var final BatchHeader
	_, err = casBytes(ctx, s.batches, BatchKey(rec.Tenant, rec.Batch), func(b []byte) ([]byte, bool) {
		var cur BatchHeader
		if json.Unmarshal(b, &cur) != nil {
			return b, false
		}
		final = cur
		if cur.Completion != nil && cur.Completion.Attempt >= rec.Attempt {
			return b, false
		}
		cur.Completion = c
		final = cur
		out, _ := json.Marshal(cur)
		return out, true
	})
	if err != nil {
		return nil, err
	}
	if final.Completion == nil || final.Completion.By != rec.ACID || final.Completion.Attempt != rec.Attempt {
		return nil, nil
	}
	return completionEvents(&final), nil
}

func completionEvents(h *BatchHeader) []events.Event {
	c := h.Completion
	var out []events.Event
	for _, kind := range []string{events.KindAB, events.KindCritic, events.KindEquivalence, events.KindRubric} {
		if ref, ok := c.Manifests[kind]; ok {
			out = append(out, events.NewAttempt(&events.ManifestEmitted{Kind: kind, Manifest: ref, ExitCode: c.Summary.ExitCode, Digest: c.Digest}, h.Tenant, h.Batch, "", 0, kind, c.Attempt, nil))
		}
	}
	summary := c.Summary
	out = append(out, events.NewAttempt(&summary, h.Tenant, h.Batch, "", 0, "", c.Attempt, nil))
	return out
}

// EachJob calls fn with every job record of a batch, one at a time, without holding
// them all.
func EachJob(ctx context.Context, kv jetstream.KeyValue, tenant, batch string, fn func(*JobRecord) error) error {
	w, err := kv.Watch(ctx, BatchPrefix(tenant, batch)+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("list jobs of %s: %w", BatchKey(tenant, batch), err)
	}
	defer w.Stop()
	for e := range w.Updates() {
		if e == nil {
			return nil
		}
		var r JobRecord
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return fmt.Errorf("job %s: corrupt record: %w", e.Key(), err)
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// LoadJobs reads every job record of a batch.
func LoadJobs(ctx context.Context, kv jetstream.KeyValue, tenant, batch string) ([]*JobRecord, error) {
	w, err := kv.Watch(ctx, BatchPrefix(tenant, batch)+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", BatchKey(tenant, batch), err)
	}
	defer w.Stop()
	var out []*JobRecord
	for e := range w.Updates() {
		if e == nil {
			break
		}
		var r JobRecord
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return nil, fmt.Errorf("job %s: corrupt record: %w", e.Key(), err)
		}
		out = append(out, &r)
	}
	return out, nil
}

// KindManifest is the manifest of the critic and equivalence kinds: one result per AC,
// in batch order, next to the ab manifest's seed-defined shape.
type KindManifest struct {
	Kind        string          `json:"kind"`
	Source      string          `json:"source"`
	BatchID     string          `json:"batch_id"`
	GeneratedAt time.Time       `json:"generated_at"`
	Results     []KindResultRow `json:"results"`
}

// KindResultRow is one AC of a KindManifest.
type KindResultRow struct {
	ACID        string              `json:"ac_id"`
	Status      string              `json:"status"`
	Reason      string              `json:"reason,omitempty"`
	Judges      []string            `json:"judges,omitempty"`
	Critic      *critic.Result      `json:"critic,omitempty"`
	Equivalence *equivalence.Report `json:"equivalence,omitempty"`
}

// Outcome classifies a final job for the batch exit code: clean, finding, blocked or
// schema violation, whatever its kind.
func Outcome(r *JobRecord) ab.Outcome {
	switch r.Status {
	case StatusBlocked:
		return ab.OutcomeBlocked
	case StatusSchemaViolation:
		return ab.OutcomeSchemaViolation
	case StatusCompared, StatusSignedOff, StatusReported, StatusNeedsFixes, StatusBudgetExhausted, StatusNeedsContext:
	default:
		return ab.OutcomeSchemaViolation
	}
	switch r.Status {
	case StatusSignedOff:
		return ab.OutcomeClean
	case StatusReported:
		if r.Rubric != nil && r.Rubric.Decision != nil && r.Rubric.Decision.AllPass {
			return ab.OutcomeClean
		}
		return ab.OutcomeFinding
	case StatusNeedsFixes:
		return ab.OutcomeFinding
	case StatusBudgetExhausted, StatusNeedsContext:
		return ab.OutcomeBlocked
	}
	switch r.Spec.Kind {
	case events.KindCritic:
		if r.Critic != nil && r.Critic.Verdict == critic.VerdictPass {
			return ab.OutcomeClean
		}
		return ab.OutcomeFinding
	case events.KindEquivalence:
		if r.Equivalence != nil && r.Equivalence.Summary.Pass {
			return ab.OutcomeClean
		}
		return ab.OutcomeFinding
	}
	if r.Comparison != nil {
		threshold := ab.DefaultThreshold
		if r.Spec.AB != nil {
			threshold = r.Spec.AB.Threshold
		}
		return r.Comparison.Outcome(threshold)
	}
	return ab.OutcomeSchemaViolation
}

// Summarize folds a batch's final job records into its summary and one manifest per
// judge kind present: the seed's `ab` manifest, and a KindManifest for critic and
// equivalence. The exit code follows the `ab` table over every job of every kind.
func Summarize(tenant, batch string, recs []*JobRecord, at time.Time) (events.BatchCompleted, map[string]any) {
	var f Fold
	for _, r := range recs {
		f.Add(r)
	}
	return f.Summary(tenant, batch, at)
}

// Fold accumulates what a batch's completion needs from each job record, keeping only
// that (the comparison, the result row, the digest links) rather than whole records, so
// a 100,000-job batch completes without holding 100,000 records.
type Fold struct {
	items []foldItem
}

type foldItem struct {
	index     int
	status    string
	kind      string
	outcome   ab.Outcome
	threshold float64
	comp      *ab.Comparison
	row       *KindResultRow
	rubric    *JobRecord
	links     []string
}

// Add folds one final job record in. The record may be reused by the caller afterwards.
func (f *Fold) Add(r *JobRecord) {
	it := foldItem{index: r.Index, status: r.Status, kind: r.Spec.Kind, outcome: Outcome(r), links: r.Inputs}
	switch r.Spec.Kind {
	case events.KindRubric:
		it.rubric = r
	case events.KindAB:
		it.threshold = -1
		if r.Spec.AB != nil {
			it.threshold = r.Spec.AB.Threshold
		}
		it.comp = r.Comparison
	default:
		it.row = &KindResultRow{ACID: r.ACID, Status: r.Status, Reason: r.BlockReason, Judges: r.Judges, Critic: r.Critic, Equivalence: r.Equivalence}
	}
	f.items = append(f.items, it)
}

// Digest is BatchDigest over the folded records.
func (f *Fold) Digest() string {
	f.sort()
	var links []string
	for _, it := range f.items {
		links = append(links, it.links...)
	}
	return ChainDigest(links)
}

func (f *Fold) sort() {
	sort.SliceStable(f.items, func(i, j int) bool { return f.items[i].index < f.items[j].index })
}

// Summary is Summarize over the folded records.
func (f *Fold) Summary(tenant, batch string, at time.Time) (events.BatchCompleted, map[string]any) {
	f.sort()
	sum := events.BatchCompleted{Total: len(f.items)}
	threshold := ab.DefaultThreshold
	var comps []ab.Comparison
	kinds := map[string]*KindManifest{}
	outcomes := make([]ab.Outcome, 0, len(f.items))
	var rubricRecs []*JobRecord
	for _, it := range f.items {
		switch it.status {
		case StatusCompared, StatusSignedOff, StatusReported, StatusNeedsFixes:
			sum.Compared++
		case StatusBlocked, StatusBudgetExhausted, StatusNeedsContext:
			sum.Blocked++
		case StatusSchemaViolation:
			sum.Violations++
		}
		outcomes = append(outcomes, it.outcome)
		if it.outcome == ab.OutcomeFinding {
			sum.Suggestions++
		}
		switch it.kind {
		case events.KindRubric:
			rubricRecs = append(rubricRecs, it.rubric)
		case events.KindAB:
			if it.threshold >= 0 {
				threshold = it.threshold
			}
			if it.comp != nil {
				comps = append(comps, *it.comp)
			}
		default:
			km := kinds[it.kind]
			if km == nil {
				km = &KindManifest{Kind: it.kind, Source: "tribunal", BatchID: batch, GeneratedAt: at.UTC()}
				kinds[it.kind] = km
			}
			km.Results = append(km.Results, *it.row)
		}
	}
	manifests := map[string]any{}
	if len(comps) > 0 {
		m := ab.BuildManifest("ab-"+tenant+"-"+batch, "tribunal", at, threshold, comps)
		manifests[events.KindAB] = m
	}
	for k, km := range kinds {
		manifests[k] = km
	}
	if len(rubricRecs) > 0 {
		manifests[events.KindRubric] = featureManifest(batch, at, rubricRecs)
	}
	sum.ExitCode = ab.ExitCode(outcomes)
	return sum, manifests
}
