package rubric

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// State is a rubric view's loop state on its job record for this batch (records.Job.Loop).
type State struct {
	// Handled is the envelope iteration of the last loop event applied in this batch.
	Handled int `json:"handled"`
	// Pending are the encoded events of the last intermediate step (a confirmation
	// render), republished when that step's event is redelivered.
	Pending       [][]byte             `json:"pending,omitempty"`
	Decision      *rubricwire.Decision `json:"decision,omitempty"`
	LastVerdict   *argus.Verdict       `json:"last_verdict,omitempty"`
	Disagreements int                  `json:"disagreements,omitempty"`
	Loop          argus.LoopState      `json:"loop"`
	SignOff       *argus.SignOff       `json:"signoff,omitempty"`
	Candidate     *events.Blob         `json:"candidate,omitempty"`
	Render        *events.Blob         `json:"render,omitempty"`
	// Previous is the render the judge ranked this one against.
	Previous *events.Blob `json:"previous,omitempty"`
	// GateResults are the gate-result.json files of this batch's iterations of the view
	// (those whose gates ran to a result), in order, written beside the results.
	GateResults []GateResultFile `json:"gate_results,omitempty"`
	// Verdicts are the normalized verdicts of this batch's judged iterations of the view,
	// in order: the seed's iteration-<n>.json files.
	Verdicts []IterationVerdict `json:"verdicts,omitempty"`
	// Rubric are the rules of the rubric the verdicts were checked against (its
	// dimensions, anchors and thresholds), so a person's review of the last verdict is
	// checked against the same rubric without its document (review.go).
	Rubric []argus.DimensionRule `json:"rubric,omitempty"`
}

// IterationVerdict is one judged iteration's normalized verdict (the seed's
// verdict_validate.py output, iteration-<n>.json).
type IterationVerdict struct {
	// Loop and Iteration name the iteration, as the view's decision numbers it.
	Loop      int           `json:"loop,omitempty"`
	Iteration int           `json:"iteration"`
	Verdict   argus.Verdict `json:"verdict"`
	// Disagreed says the judge's own all_pass or failed_dimensions contradicted its
	// scores (argus.VerdictCheck.Disagreed): a doubt that sends the view to people.
	Disagreed bool `json:"disagreed,omitempty"`
}

// GateResultFile is one iteration's gate-result.json in blob storage.
type GateResultFile struct {
	// Loop and Iteration name the iteration, as the view's decision numbers it.
	Loop      int         `json:"loop,omitempty"`
	Iteration int         `json:"iteration"`
	Blob      events.Blob `json:"blob"`
}

// StateOf reads a rubric job's loop state; nil when the job has none yet.
func StateOf(j *records.Job) (*State, error) { return kind.Unmarshal[State](j, j.Loop, "rubric state") }

func setState(j *records.Job, s *State) error { return kind.Marshal(j, &j.Loop, "rubric state", s) }

// loopStep is one loop event: a verdict, an unchanged confirmation, or red gates.
type loopStep struct {
	verdict   *argus.Verdict
	disagreed bool
	unchanged bool
	gates     []string
	render    *events.Blob
	judge     string
	// gateResult is the step's gate-result.json, when its gates ran to a result.
	gateResult *events.Blob
}

// Decide implements kind.Kind. A rubric view takes every loop event itself: red gates (a
// gate failure, streak reset), a missing reference (HE-1), an unchanged confirmation, a
// verdict and a person's spot-check (HE-2).
func (Kind) Decide(st *kind.Step) error {
	if rubricwire.SpecOf(st.Job.Spec.KindPart) == nil {
		return fmt.Errorf("%w: job %s is not a rubric view", kind.ErrNotForKind, st.Job.Key())
	}
	switch p := st.Event.Payload.(type) {
	case *events.GatesFailed:
		if p.NeedsContext != "" {
			j := st.Job
			j.Status, j.BlockStage, j.BlockReason = events.StatusNeedsContext, "reference", p.NeedsContext
			candidate := p.Candidate
			if candidate != nil && (candidate.SHA256 == "" || !rubricwire.SpecOf(j.Spec.KindPart).Canonical || rubricwire.SpecOf(j.Spec.KindPart).Mode == events.ModeReportOnly) {
				// One candidate per target, its canonical view's (seed 004), and none from a
				// report-only look.
				candidate = nil
			}
			if rs := rubricwire.SpecOf(j.Spec.KindPart); candidate != nil {
				// Where the person finds the candidate, and the seed's three ways on.
				j.BlockReason = fmt.Sprintf("target %s has no approved reference (status %s): the candidate %s (beside the results, and in the feature's .argus-runs/ where the run keeps the batch's folder) awaits a person: move it to %s as it is (status present, source candidate), replace it (source human), or correct spec.md",
					rs.Target, rs.ReferenceStatus, argus.CandidateFile(rs.Target, rs.State, rs.Appearance), argus.ReferenceFile(rs.Target, rs.State, rs.Appearance))
			}
			return setState(j, &State{Candidate: candidate})
		}
		var failing []string
		for _, g := range p.Gates {
			if g.Status.Failed() {
				failing = append(failing, g.Name)
			}
		}
		return step(st, loopStep{gates: failing, gateResult: p.GateResult})
	case *events.RenderUnchanged:
		render := p.Render
		return step(st, loopStep{unchanged: true, render: &render, gateResult: p.GateResult})
	case *events.VerdictEmitted:
		if rubricwire.VoteOf(p.KindPart) == nil {
			return fmt.Errorf("%w: a rubric job takes rubric verdicts", kind.ErrNotForKind)
		}
		return vote(st, rubricwire.VoteOf(p.KindPart))
	case *events.SpotcheckRecorded:
		return spotcheck(st, p)
	}
	return fmt.Errorf("%w: a rubric job does not take %s", kind.ErrNotForKind, st.Event.Type)
}

// vote handles a rubric judge's answer: a valid verdict is a loop step; an invalid one is
// a schema violation and an unreachable judge blocks the view. all_pass and
// failed_dimensions are re-derived from the scores and the rubric's thresholds.
func vote(st *kind.Step, v *rubricwire.Vote) error {
	name := kind.JudgeName(v.Judge)
	status, problem := v.Status, v.Error
	if status == events.VoteOK {
		verdict, disagreed, err := normalize(rubricOf(st), v)
		if err == nil {
			render := v.Render
			return step(st, loopStep{verdict: verdict, disagreed: disagreed, render: &render, judge: name, gateResult: v.GateResult})
		}
		status, problem = events.VoteSchemaViolation, err.Error()
	}
	j := st.Job
	j.Judges = []string{name}
	if status == events.VoteUnavailable || status == events.VoteBlocked {
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", fmt.Sprintf("judge unavailable (%s): %s", name, problem)
		return nil
	}
	j.Status, j.BlockReason = events.StatusSchemaViolation, fmt.Sprintf("%s (%s)", problem, name)
	j.Decided = &events.IterationDecided{Kind: events.KindRubric, ACID: j.ACID, Status: events.StatusSchemaViolation, Final: true}
	return nil
}

// rubricOf is the rubric of the view a step carries, nil when the caller gave none.
func rubricOf(st *kind.Step) *argus.Rubric {
	if vs := viewOf(st); vs != nil {
		return vs.Rubric
	}
	return nil
}

func normalize(r *argus.Rubric, v *rubricwire.Vote) (*argus.Verdict, bool, error) {
	parsed, err := argus.ParseVerdict([]byte(v.Verdict))
	if err != nil {
		return nil, false, err
	}
	if r == nil {
		return nil, false, fmt.Errorf("the view's rubric was not given to the rules")
	}
	chk, err := argus.NormalizeVerdict(*parsed, r)
	if err != nil {
		return nil, false, err
	}
	return &chk.Verdict, chk.Disagreed, nil
}

// step applies one loop step to a view: the loop arithmetic on the view's durable state
// (idempotent per event: the view keeps the last applied event and its decision), then the
// decision for this batch: confirm (re-render without an edit), fix (the builder's turn),
// sign-off, or budget spent.
func step(st *kind.Step, s loopStep) error {
	j, ev := st.Job, st.Event
	rs := rubricwire.SpecOf(j.Spec.KindPart)
	state, err := StateOf(j)
	if err != nil {
		return err
	}
	if state != nil && ev.Iteration <= state.Handled {
		// This batch applied the step already: announce what it announced then.
		pending, err := decodeAll(state.Pending)
		if err != nil {
			return err
		}
		st.Publish = append(st.Publish, pending...)
		st.Replayed = true
		return nil
	}
	vs := viewOf(st)
	if vs == nil {
		return fmt.Errorf("job %s: the view's state was not given to the rules", j.Key())
	}
	if vs.Rubric == nil {
		return fmt.Errorf("job %s: the view's rubric was not given to the rules", j.Key())
	}
	params := vs.Rubric.LoopParams()
	if rs.MaxIterations > 0 {
		params.MaxIterations = rs.MaxIterations
	}
	v := &vs.Record
	dry := rs.Mode == events.ModeReportOnly
	current, _ := v.For(rs)
	var previous *events.Blob
	var d argus.Decision
	var began []string
	if v.LastApplied == ev.ID {
		// The view took this event before the job record did (a crash between the two
		// writes, or a record another writer changed in between): its decision and the
		// render it was ranked against stand, the loop does not count it twice.
		d, previous = v.LastDecision, v.LastPrevious
		if d.Iteration == 1 {
			began = v.Began
		}
	} else {
		previous = v.PrevRender
		d, began = v.Apply(ev.Tenant, rs, s.verdict, s.unchanged, s.render, params, st.Now)
		if !dry {
			// A report-only step changes nothing durable (Record.Apply): the view is not
			// stored, so no iteration, attempt or budget is spent.
			v.LastApplied, v.LastDecision, v.LastPrevious = ev.ID, d, previous
			st.StateChanged = true
		}
	}
	dec := &rubricwire.Decision{
		View: rs.Target + "/" + rs.State + "/" + rs.Appearance, LoopIteration: d.Iteration, FixDimensions: d.FixDimensions,
		FailingGates: s.gates, Frozen: d.Frozen, NewlyFrozen: d.NewlyFrozen, ConsecutivePasses: d.ConsecutivePasses, Unchanged: s.unchanged,
		Loop: current.Generation, NewLoop: began,
	}
	switch {
	case s.verdict != nil:
		dec.AllPass, dec.FailedDimensions = s.verdict.AllPass, s.verdict.FailedDimensions
	case s.unchanged && d.ConsecutivePasses > 0 && v.LastVerdict != nil && v.LastVerdict.AllPass:
		// An unchanged render confirms the state the last verdict judged, which passed
		// every dimension (seed 004: the confirm's last_verdict is that all-pass verdict).
		dec.AllPass, dec.FailedDimensions = true, []string{}
	}
	status := events.StatusPending
	switch {
	case rs.Mode == events.ModeReportOnly:
		dec.Outcome, status = "reported", events.StatusReported
	case d.ShouldSignoff:
		dec.Outcome, status = "signed_off", events.StatusSignedOff
		if rs.Mode == events.ModeInteractive {
			if st.Claim == "" {
				// Which sign-off of an interactive batch waits for a person is decided by a
				// claim the caller makes; decide again once it has.
				st.WantsClaim = true
				return nil
			}
			if st.Claim == j.ACID {
				status = events.StatusAwaitingSpotcheck
			}
		}
	case d.BudgetExhausted:
		dec.Outcome, status = "budget_exhausted", events.StatusBudgetExhausted
	case s.verdict != nil && s.verdict.AllPass || s.unchanged:
		dec.Outcome = "confirm"
	case s.verdict != nil && len(d.FixDimensions) == 0:
		// Every failing dimension is frozen. The seed's loop hands the implementer
		// decision.fix_dimensions, which is empty now (loop_state.py `record`), and goes
		// on: sense, gates, a fresh judge. The builder has nothing to fix, so waiting for
		// its next run would only spend one iteration per run: render again without an
		// edit and judge again, until a judge passes the view or the budget blocks it.
		dec.Outcome = "recheck"
	default:
		dec.Outcome, status = "fix", events.StatusNeedsFixes
	}
	decided := &events.IterationDecided{Kind: events.KindRubric, ACID: j.ACID, Status: status, Final: status.Final(), KindPart: dec}
	if s.disagreed {
		decided.Disagreements = 1
	}
	var signoff []events.Event
	if status == events.StatusSignedOff || status == events.StatusAwaitingSpotcheck {
		so := SignoffEvent(ev, v.SignOff)
		so.Payload.(*events.SignoffRecorded).Digest = records.ChainDigest(append(append([]string(nil), j.Inputs...), st.Link))
		signoff = append(signoff, so)
	}
	if state == nil {
		state = &State{}
	}
	state.Handled, state.Decision = ev.Iteration, dec
	state.LastVerdict, state.Loop, state.SignOff, state.Render, state.Previous = v.LastVerdict, v.Loop, v.SignOff, s.render, previous
	if dry {
		// The view kept its loop; this run's verdict is the report.
		state.LastVerdict, state.SignOff = s.verdict, nil
	}
	if s.gateResult != nil {
		state.GateResults = append(state.GateResults, GateResultFile{Loop: dec.Loop, Iteration: d.Iteration, Blob: *s.gateResult})
	}
	if s.verdict != nil {
		state.Verdicts = append(state.Verdicts, IterationVerdict{Loop: dec.Loop, Iteration: d.Iteration, Verdict: *s.verdict, Disagreed: s.disagreed})
		state.Rubric = vs.Rubric.Rules()
	}
	j.Judges = kind.AddJudge(j.Judges, s.judge)
	if status.Final() {
		j.Status, j.Decided = status, decided
		state.Pending = nil
		if status == events.StatusBudgetExhausted {
			j.BlockStage, j.BlockReason = "loop", fmt.Sprintf("iteration budget of %d spent without %d consecutive passes", d.MaxIterations, d.RequiredPasses)
		}
		st.Publish = append(st.Publish, signoff...)
		return setState(j, state)
	}
	// Not final yet: announce the step now, under the ids of this iteration.
	pending := []events.Event{events.New(decided, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}
	pending = append(pending, signoff...)
	if status == events.StatusPending {
		// Render again without an edit: to confirm a pass (all passed, no streak yet; an
		// unchanged render confirms it without a judge), or to judge a view whose only
		// failures are frozen again.
		spec := j.Spec
		again := *rubricwire.SpecOf(spec.KindPart)
		again.Confirm = dec.Outcome == "confirm"
		spec.KindPart = &again
		pending = append(pending, events.New(&events.RenderRequested{Spec: spec}, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration+1, "", &ev.Envelope))
	}
	if state.Pending, err = encodeAll(pending); err != nil {
		return err
	}
	if status == events.StatusAwaitingSpotcheck {
		j.Status = events.StatusAwaitingSpotcheck
	}
	st.Publish = append(st.Publish, pending...)
	return setState(j, state)
}

// spotcheck records a person's HE-2 decision on a sign-off that waits for it. A rejection
// must name one of the view's rubric dimensions (the seed's human "names the dimension the
// judge got wrong so you can tune rubric.json"): any other is refused, and the sign-off
// keeps waiting for an answer that can be tuned. The publishers check the same
// (argus.Rubric.CheckSpotcheck); this rule holds for an event published by anyone.
func spotcheck(st *kind.Step, p *events.SpotcheckRecorded) error {
	value := argus.SpotcheckApproved
	if !p.Approved {
		value = p.Dimension
	}
	vs := viewOf(st)
	if vs == nil {
		return fmt.Errorf("job %s: the view's state was not given to the rules", st.Job.Key())
	}
	if vs.Rubric == nil {
		return fmt.Errorf("job %s: the view's rubric was not given to the rules", st.Job.Key())
	}
	if err := vs.Rubric.CheckSpotcheck(p.Approved, p.Dimension); err != nil {
		return fmt.Errorf("%w: spot-check of %s: %v", kind.ErrRefused, st.Job.ACID, err)
	}
	// Only a sign-off waiting for its HE-2 answer takes one: a spot-check of a view still
	// in its loop would sign it off without its two passes (the ingress checks only that
	// the job exists).
	if st.Job.Status != events.StatusAwaitingSpotcheck {
		return fmt.Errorf("%w: spot-check of %s: the view is %s, not waiting for a spot-check", kind.ErrRefused, st.Job.ACID, st.Job.Status)
	}
	if vs.Record.SignOff != nil && vs.Record.SignOff.HumanSpotcheck != value {
		so := *vs.Record.SignOff
		so.HumanSpotcheck = value
		vs.Record.SignOff = &so
		st.StateChanged = true
	}
	j := st.Job
	state, err := StateOf(j)
	if err != nil {
		return err
	}
	if state == nil {
		state = &State{}
	}
	if state.SignOff != nil {
		so := *state.SignOff
		so.HumanSpotcheck = value
		state.SignOff = &so
	}
	state.Pending = nil
	j.Status = events.StatusSignedOff
	j.Decided = &events.IterationDecided{Kind: events.KindRubric, ACID: j.ACID, Status: events.StatusSignedOff, Final: true, KindPart: state.Decision}
	return setState(j, state)
}

// SignoffEvent announces a view's sign-off.
func SignoffEvent(cause events.Event, so *argus.SignOff) events.Event {
	p := &events.SignoffRecorded{}
	if so != nil {
		p = &events.SignoffRecorded{Feature: so.Feature, Target: so.Target, State: so.State, Appearance: so.Appearance,
			SignedOffAt: so.SignedOffAt.Format(time.RFC3339), Iterations: so.Iterations, ReferenceSource: so.ReferenceSource,
			HumanSpotcheck: so.HumanSpotcheck}
		if so.FinalVerdict != nil {
			data, _ := json.Marshal(so.FinalVerdict)
			p.FinalVerdict = string(data)
		}
	}
	return events.New(p, cause.Tenant, cause.BatchID, cause.JobID, cause.Iteration, "", &cause.Envelope)
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
