package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/argus"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/views"
)

// Rubric view outcomes recorded on the job (its status when final).
const (
	StatusSignedOff         = "signed_off"
	StatusNeedsFixes        = "needs_fixes"
	StatusBudgetExhausted   = "budget_exhausted"
	StatusNeedsContext      = "needs_context"
	StatusReported          = "reported"
	StatusAwaitingSpotcheck = "awaiting_spotcheck"
)

// RubricRecord is a rubric view's state on its job record for this batch.
type RubricRecord struct {
	// Handled is the envelope iteration of the last loop event applied in this batch.
	Handled int `json:"handled"`
	// Pending are the encoded events of the last intermediate step (a confirmation
	// render), republished when that step's event is redelivered.
	Pending       [][]byte               `json:"pending,omitempty"`
	Decision      *events.RubricDecision `json:"decision,omitempty"`
	LastVerdict   *argus.Verdict         `json:"last_verdict,omitempty"`
	Disagreements int                    `json:"disagreements,omitempty"`
	Loop          argus.LoopState        `json:"loop"`
	SignOff       *argus.SignOff         `json:"signoff,omitempty"`
	Candidate     *events.Blob           `json:"candidate,omitempty"`
	Render        *events.Blob           `json:"render,omitempty"`
	// Previous is the render the judge ranked this one against.
	Previous *events.Blob `json:"previous,omitempty"`
}

// WithViews gives the aggregator the rubric view state it owns.
func (s *Service) WithViews(kv jetstream.KeyValue) *Service {
	s.views = kv
	return s
}

// loopStep is one loop event: a verdict, an unchanged confirmation, or red gates.
type loopStep struct {
	verdict   *argus.Verdict
	disagreed bool
	unchanged bool
	gates     []string
	render    *events.Blob
	judge     string
}

// rubricStep applies one loop step to a view: the loop arithmetic on the view's durable
// state (compare-and-set, idempotent per event), then the decision for this batch: confirm
// (re-render without an edit), fix (the builder's turn), sign-off, or budget spent.
func (s *Service) rubricStep(ctx context.Context, ev events.Event, step loopStep) ([]events.Event, error) {
	key := JobKey(ev.Tenant, ev.BatchID, ev.JobID)
	rec, _, err := getJob(ctx, s.jobs, key)
	if err != nil {
		return nil, err
	}
	if rec.Final() {
		return s.decide(ctx, ev, func(*JobRecord) {})
	}
	rs := rec.Spec.Rubric
	if rec.Rubric != nil && ev.Iteration <= rec.Rubric.Handled {
		return decodeAll(rec.Rubric.Pending)
	}
	rubric, err := s.rubricOf(ctx, ev.Tenant, rs)
	if err != nil {
		return nil, err
	}
	params := rubric.LoopParams()
	if rs.MaxIterations > 0 {
		params.MaxIterations = rs.MaxIterations
	}
	var d argus.Decision
	var signoff *argus.SignOff
	var previous *events.Blob
	vkey := views.Key(ev.Tenant, rs)
	vrec, err := views.Update(ctx, s.views, vkey, func(v *views.Record) error {
		if v.LastApplied == ev.ID {
			d = v.LastDecision
			return views.ErrNoChange
		}
		previous = v.PrevRender
		d = v.Apply(ev.Tenant, rs, step.verdict, step.unchanged, step.render, params, s.now())
		v.LastApplied, v.LastDecision = ev.ID, d
		return nil
	})
	if err != nil {
		return nil, err
	}
	signoff = vrec.SignOff
	dec := &events.RubricDecision{
		View: rs.Target + "/" + rs.State + "/" + rs.Appearance, LoopIteration: d.Iteration, FixDimensions: d.FixDimensions,
		FailingGates: step.gates, Frozen: d.Frozen, NewlyFrozen: d.NewlyFrozen, ConsecutivePasses: d.ConsecutivePasses, Unchanged: step.unchanged,
	}
	if step.verdict != nil {
		dec.AllPass, dec.FailedDimensions = step.verdict.AllPass, step.verdict.FailedDimensions
	}
	status := StatusPending
	switch {
	case rs.Mode == events.ModeReportOnly:
		dec.Outcome, status = "reported", StatusReported
	case d.ShouldSignoff:
		dec.Outcome, status = "signed_off", StatusSignedOff
		if rs.Mode == events.ModeInteractive {
			first, err := s.firstSignoff(ctx, ev)
			if err != nil {
				return nil, err
			}
			if first {
				status = StatusAwaitingSpotcheck
			}
		}
	case d.BudgetExhausted:
		dec.Outcome, status = "budget_exhausted", StatusBudgetExhausted
	case step.verdict != nil && step.verdict.AllPass || step.unchanged:
		dec.Outcome = "confirm"
	default:
		dec.Outcome, status = "fix", StatusNeedsFixes
	}
	decided := &events.IterationDecided{Kind: events.KindRubric, ACID: rec.ACID, Status: status, Final: status != StatusPending && status != StatusAwaitingSpotcheck, Rubric: dec}
	if step.disagreed {
		decided.Disagreements = 1
	}
	decidedEv := events.New(decided, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)
	var extra []events.Event
	if status == StatusSignedOff || status == StatusAwaitingSpotcheck {
		so := signoffEvent(ev, signoff, StatusSignedOff == status)
		so.Payload.(*events.SignoffRecorded).Digest = ChainDigest(append(append([]string(nil), rec.Inputs...), inputLink(ctx, ev)...))
		extra = append(extra, so)
	}
	if status == StatusPending || status == StatusAwaitingSpotcheck {
		var next []events.Event
		if status == StatusPending {
			// All passed but no streak yet: render again without an edit to confirm.
			spec := rec.Spec
			confirm := *spec.Rubric
			confirm.Confirm = true
			spec.Rubric = &confirm
			next = append(next, events.New(&events.RenderRequested{Spec: spec}, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration+1, "", &ev.Envelope))
		}
		pending := append(append([]events.Event{decidedEv}, extra...), next...)
		encoded, err := encodeAll(pending)
		if err != nil {
			return nil, err
		}
		_, err = updateJob(ctx, s.jobs, key, func(r *JobRecord) bool {
			if r.Final() || (r.Rubric != nil && r.Rubric.Handled >= ev.Iteration) {
				return false
			}
			if r.Rubric == nil {
				r.Rubric = &RubricRecord{}
			}
			r.Rubric.Handled, r.Rubric.Pending, r.Rubric.Decision = ev.Iteration, encoded, dec
			telemetry.JudgeDisagreements(events.KindRubric, decided)
			r.Judges = addJudge(r.Judges, step.judge)
			r.Inputs = append(r.Inputs, inputLink(ctx, ev)...)
			r.Rubric.LastVerdict, r.Rubric.Loop, r.Rubric.SignOff, r.Rubric.Render = vrec.LastVerdict, vrec.Loop, signoff, step.render
			r.Rubric.Previous = previous
			if status == StatusAwaitingSpotcheck {
				r.Status = StatusAwaitingSpotcheck
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		return pending, nil
	}
	out, err := s.decide(ctx, ev, func(r *JobRecord) {
		r.Status = status
		if r.Rubric == nil {
			r.Rubric = &RubricRecord{}
		}
		r.Rubric.Handled, r.Rubric.Decision, r.Rubric.LastVerdict, r.Rubric.Loop, r.Rubric.SignOff, r.Rubric.Render =
			ev.Iteration, dec, vrec.LastVerdict, vrec.Loop, signoff, step.render
		r.Rubric.Previous = previous
		r.Decided = decided
		r.Judges = addJudge(r.Judges, step.judge)
		if status == StatusBudgetExhausted {
			r.BlockStage, r.BlockReason = "loop", fmt.Sprintf("iteration budget of %d spent without %d consecutive passes", d.MaxIterations, d.RequiredPasses)
		}
	})
	if err != nil {
		return nil, err
	}
	return append(out, extra...), nil
}

// firstSignoff reports whether this is the first sign-off of the batch, the one that
// waits for a person in interactive mode (HE-2).
func (s *Service) firstSignoff(ctx context.Context, ev events.Event) (bool, error) {
	_, err := s.batches.Create(ctx, BatchKey(ev.Tenant, ev.BatchID)+".spotcheck", []byte(ev.JobID))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := s.batches.Get(ctx, BatchKey(ev.Tenant, ev.BatchID)+".spotcheck")
		if gerr != nil {
			return false, gerr
		}
		return string(e.Value()) == ev.JobID, nil
	}
	return false, err
}

// spotcheck records a person's HE-2 decision on a sign-off that waits for it.
func (s *Service) spotcheck(ctx context.Context, ev events.Event, p *events.SpotcheckRecorded) ([]events.Event, error) {
	value := argus.SpotcheckApproved
	if !p.Approved {
		value = p.Dimension
	}
	rec, _, err := getJob(ctx, s.jobs, JobKey(ev.Tenant, ev.BatchID, p.ACID))
	if err != nil {
		return nil, err
	}
	if rec.Spec.Rubric == nil {
		return nil, fmt.Errorf("spot-check for %s, which is not a rubric view", p.ACID)
	}
	if _, err := views.Update(ctx, s.views, views.Key(ev.Tenant, rec.Spec.Rubric), func(v *views.Record) error {
		if v.SignOff == nil || v.SignOff.HumanSpotcheck == value {
			return views.ErrNoChange
		}
		v.SignOff.HumanSpotcheck = value
		return nil
	}); err != nil {
		return nil, err
	}
	target := ev
	target.JobID = p.ACID
	return s.decide(ctx, target, func(r *JobRecord) {
		r.Status = StatusSignedOff
		if r.Rubric != nil && r.Rubric.SignOff != nil {
			so := *r.Rubric.SignOff
			so.HumanSpotcheck = value
			r.Rubric.SignOff = &so
		}
		r.Decided = &events.IterationDecided{Kind: events.KindRubric, ACID: r.ACID, Status: StatusSignedOff, Final: true, Rubric: r.Rubric.Decision}
	})
}

func signoffEvent(ev events.Event, so *argus.SignOff, final bool) events.Event {
	p := &events.SignoffRecorded{Feature: so.Feature, Target: so.Target, State: so.State, Appearance: so.Appearance,
		SignedOffAt: so.SignedOffAt.Format(time.RFC3339), Iterations: so.Iterations, ReferenceSource: so.ReferenceSource,
		HumanSpotcheck: so.HumanSpotcheck}
	if so.FinalVerdict != nil {
		data, _ := json.Marshal(so.FinalVerdict)
		p.FinalVerdict = string(data)
	}
	return events.New(p, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)
}

func (s *Service) rubricOf(ctx context.Context, tenant string, rs *events.RubricSpec) (*argus.Rubric, error) {
	data, _, err := blob.ReadAll(ctx, s.store, blob.Ref{Tenant: tenant, SHA256: rs.Rubric.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read rubric: %w", err)
	}
	return argus.ParseRubric(data)
}

func encodeAll(evs []events.Event) ([][]byte, error) {
	out := make([][]byte, len(evs))
	for i, e := range evs {
		b, err := events.Encode(e)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func decodeAll(bs [][]byte) ([]events.Event, error) {
	out := make([]events.Event, 0, len(bs))
	for _, b := range bs {
		e, err := events.Decode(b)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// rubricVerdict validates a rubric vote and re-derives all_pass and failed_dimensions
// from the scores and the rubric's thresholds, counting a judge that disagreed.
func (s *Service) rubricVerdict(ctx context.Context, tenant string, rs *events.RubricSpec, v *events.RubricVote) (*argus.Verdict, bool, error) {
	parsed, err := argus.ParseVerdict([]byte(v.Verdict))
	if err != nil {
		return nil, false, err
	}
	rubric, err := s.rubricOf(ctx, tenant, rs)
	if err != nil {
		return nil, false, err
	}
	chk, err := argus.NormalizeVerdict(*parsed, rubric)
	if err != nil {
		return nil, false, err
	}
	return &chk.Verdict, chk.Disagreed, nil
}

// rubricVote handles a rubric judge's answer: a valid verdict is a loop step; an invalid
// one is a schema violation and an unreachable judge blocks the view.
func (s *Service) rubricVote(ctx context.Context, ev events.Event, v *events.RubricVote) ([]events.Event, error) {
	judgeName := v.Judge.Provider + "/" + v.Judge.Model
	if v.Status == "ok" {
		rec, _, err := getJob(ctx, s.jobs, JobKey(ev.Tenant, ev.BatchID, ev.JobID))
		if err != nil {
			return nil, err
		}
		verdict, disagreed, verr := s.rubricVerdict(ctx, ev.Tenant, rec.Spec.Rubric, v)
		if verr == nil {
			render := v.Render
			return s.rubricStep(ctx, ev, loopStep{verdict: verdict, disagreed: disagreed, render: &render, judge: judgeName})
		}
		v.Status, v.Error = "schema_violation", verr.Error()
	}
	return s.decide(ctx, ev, func(r *JobRecord) {
		r.Judges = []string{judgeName}
		if v.Status == "unavailable" || v.Status == "blocked" {
			r.Status, r.BlockStage, r.BlockReason = StatusBlocked, "judge", fmt.Sprintf("judge unavailable (%s): %s", judgeName, v.Error)
			return
		}
		r.Status, r.BlockReason = StatusSchemaViolation, fmt.Sprintf("%s (%s)", v.Error, judgeName)
		r.Decided = &events.IterationDecided{Kind: events.KindRubric, ACID: r.ACID, Status: StatusSchemaViolation, Final: true}
	})
}

func addJudge(js []string, j string) []string {
	if j == "" {
		return js
	}
	for _, x := range js {
		if x == j {
			return js
		}
	}
	return append(js, j)
}

// FeatureManifest is the manifest of the rubric kind: each feature's status and its
// views' loop outcomes, sign-offs included.
type FeatureManifest struct {
	Kind        string          `json:"kind"`
	Source      string          `json:"source"`
	BatchID     string          `json:"batch_id"`
	GeneratedAt time.Time       `json:"generated_at"`
	Features    []FeatureResult `json:"features"`
}

// FeatureResult is one feature's folded status and its views.
type FeatureResult struct {
	Feature string              `json:"feature"`
	Status  argus.FeatureStatus `json:"status"`
	Reasons []string            `json:"reasons"`
	Views   []ViewResultRow     `json:"views"`
}

// ViewResultRow is one view's outcome in this batch.
type ViewResultRow struct {
	View        string                 `json:"view"`
	Job         string                 `json:"job"`
	Status      string                 `json:"status"`
	Reason      string                 `json:"reason,omitempty"`
	Decision    *events.RubricDecision `json:"decision,omitempty"`
	LastVerdict *argus.Verdict         `json:"last_verdict,omitempty"`
	SignOff     *argus.SignOff         `json:"signoff,omitempty"`
	Candidate   *events.Blob           `json:"candidate,omitempty"`
	Render      *events.Blob           `json:"render,omitempty"`
}

// viewResult maps a rubric job's status onto the feature-status fold.
func viewResult(r *JobRecord) argus.ViewOutcome {
	rs := r.Spec.Rubric
	o := argus.ViewOutcome{View: rs.Target + "/" + rs.State + "/" + rs.Appearance, Reason: r.BlockReason}
	if rs.Blocked != "" {
		o.View = r.ACID
	}
	if r.Rubric != nil {
		o.Frozen = r.Rubric.Loop.Frozen
		if r.Rubric.SignOff != nil {
			o.HumanSpotcheck = r.Rubric.SignOff.HumanSpotcheck
		}
	}
	switch r.Status {
	case StatusSignedOff, StatusReported:
		o.Result = argus.ViewSignedOff
	case StatusBudgetExhausted:
		o.Result = argus.ViewBudgetExhausted
	case StatusNeedsContext:
		o.Result = argus.ViewNeedsReference
	case StatusNeedsFixes, StatusPending, StatusAwaitingSpotcheck:
		o.Result = argus.ViewInProgress
	default:
		o.Result = argus.ViewBlocked
		if o.Reason == "" {
			o.Reason = r.Status
		}
	}
	return o
}

// featureManifest folds the rubric jobs of a batch into per-feature results.
func featureManifest(batch string, at time.Time, recs []*JobRecord) *FeatureManifest {
	m := &FeatureManifest{Kind: events.KindRubric, Source: "tribunal", BatchID: batch, GeneratedAt: at.UTC()}
	byFeature := map[string]*FeatureResult{}
	inputs := map[string]*argus.FeatureInput{}
	var order []string
	for _, r := range recs {
		rs := r.Spec.Rubric
		name := rs.Feature
		if name == "" {
			name = r.ACID
		}
		fr := byFeature[name]
		if fr == nil {
			fr = &FeatureResult{Feature: name}
			byFeature[name] = fr
			inputs[name] = &argus.FeatureInput{}
			order = append(order, name)
		}
		vo := viewResult(r)
		inputs[name].Views = append(inputs[name].Views, vo)
		row := ViewResultRow{View: vo.View, Job: r.ACID, Status: r.Status, Reason: r.BlockReason}
		if r.Rubric != nil {
			row.Decision, row.LastVerdict, row.SignOff, row.Candidate, row.Render = r.Rubric.Decision, r.Rubric.LastVerdict, r.Rubric.SignOff, r.Rubric.Candidate, r.Rubric.Render
		}
		fr.Views = append(fr.Views, row)
	}
	for _, name := range order {
		rep := argus.FoldFeatureStatus(*inputs[name])
		fr := byFeature[name]
		fr.Status, fr.Reasons = rep.Status, rep.Reasons
		m.Features = append(m.Features, *fr)
	}
	return m
}
