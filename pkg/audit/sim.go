package audit

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/aggregate"
	"github.com/tribunal-dev/tribunal/pkg/argus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/views"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// This file replays the aggregator: the same rules, in stream order, on plain values
// instead of key-value records. Every rule cites what it mirrors in services/aggregator;
// a change there must be made here too, or the audit reports the difference.

type jobKey struct{ tenant, batch, job string }

type batchKey struct{ tenant, batch string }

// simJob is a job record being rebuilt.
type simJob struct {
	rec *aggregator.JobRecord
	// submitted is the job.submitted the record was created from.
	submitted *Recorded
}

// simBatch is a batch header being rebuilt.
type simBatch struct {
	size  int
	final map[int]bool
	jobs  []*simJob
	// completions are the batch's completions in stream order: the first pass's, set by
	// the event that made the last job final, then one per redrive whose last job became
	// final again. Each is verified against the records as they were at that moment.
	completions []*simCompletion
	// redrives are the jobs each redrive attempt sends through again, read from the
	// whole replay up front: the aggregator knows them from the batch header, which
	// `tribunal redrive` writes before it publishes the first request.
	redrives map[int][]string
	// redrive mirrors BatchHeader.Redrive: the redrive in progress and the jobs it
	// still waits for.
	redrive *simRedrive
	// spotJob is the view whose sign-off waits for a person (interactive mode).
	spotJob string
	// awaiting are the jobs the recorded decisions say wait for a spot-check.
	awaiting []string
	// digest and summary are re-derived at completion.
	digest  string
	summary *events.BatchCompleted
}

// simCompletion is one completion of a batch (BatchHeader.Completion at that moment).
type simCompletion struct {
	// attempt is the redrive attempt it completes (0: the first pass).
	attempt int
	// by is the event that made its last job final.
	by *Recorded
	// snapshot are the job records as the completing aggregator loaded them: a later
	// redrive changes the records, never what an earlier completion was built from.
	snapshot [][]byte
}

// simRedrive mirrors aggregator.Redrive.
type simRedrive struct {
	attempt int
	pending []string
}

// expectation is an event the aggregator must have published.
type expectation struct {
	ev events.Event
	// ids are the ids it may be recorded under, first choice first.
	ids []string
	// from is the input it was derived from (nil for none).
	from *Recorded
	what string
	// skip are wire fields compared elsewhere (or not derivable).
	skip []string
}

// step is one loop event of a rubric view (mirrors aggregator.loopStep).
type step struct {
	verdict   *argus.Verdict
	disagreed bool
	unchanged bool
	gates     []string
	render    *events.Blob
	judge     string
}

// applyInput feeds one recorded event to the rebuilt aggregator. It returns false when
// the job it needs is not recorded yet (the aggregator retries such an event until the
// job's submission is handled).
func (a *auditor) applyInput(r *Recorded) bool {
	if r.DeadLetter != "" {
		a.deadLetter(r)
		return true
	}
	ev := r.Event
	switch p := ev.Payload.(type) {
	case *events.JobSubmitted:
		a.submitted(r, p, true)
		return true
	case *events.RenderUnchanged:
		render := p.Render
		return a.rubricStep(r, ev, step{unchanged: true, render: &render})
	case *events.SpotcheckRecorded:
		return a.spotcheck(r, ev, p)
	case *events.GatesFailed:
		if p.Kind == events.KindRubric && p.Blocked == "" {
			if p.NeedsContext != "" {
				return a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
					rec.Status, rec.BlockStage, rec.BlockReason = aggregator.StatusNeedsContext, "reference", p.NeedsContext
					rec.Rubric = &aggregator.RubricRecord{Candidate: p.Candidate}
				})
			}
			var failing []string
			for _, g := range p.Gates {
				if g.Status == "fail" {
					failing = append(failing, g.Name)
				}
			}
			return a.rubricStep(r, ev, step{gates: failing})
		}
		return a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
			rec.Status, rec.BlockStage = aggregator.StatusBlocked, "gate"
			if p.Blocked != "" {
				rec.BlockStage, rec.BlockReason = "render", p.Blocked
			} else {
				rec.BlockReason = failedGates(p.Gates)
			}
			if rec.Spec.Kind == events.KindAB {
				c := ab.Blocked(rec.ACID, aggregate.Pair(rec.Spec), ab.Assign(rec.ACID, rec.Iteration), rec.BlockReason)
				rec.Comparison = &c
			}
		})
	case *events.VerdictEmitted:
		switch p.Kind {
		case events.KindCritic:
			return a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
				vote := *p.Critic // DeriveCritic writes into the vote it is given
				d := aggregate.DeriveCritic(rec.Spec, &vote)
				rec.Status, rec.Critic, rec.Decided = d.Status, &d.Result, d.Decided
				rec.Judges = d.Decided.Judges
				if d.Blocked != "" {
					rec.BlockStage, rec.BlockReason = "judge", d.Blocked
				}
			})
		case events.KindRubric:
			return a.rubricVote(r, ev, *p.Rubric)
		case events.KindEquivalence:
			return a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
				d := aggregate.DeriveEquivalence(rec.Spec, append([]events.CaseVote(nil), p.Cases...))
				rec.Status, rec.Equivalence, rec.Decided = d.Status, &d.Report, d.Decided
				rec.Judges = d.Decided.Judges
				if d.Blocked != "" {
					rec.BlockStage, rec.BlockReason = "judge", d.Blocked
				}
			})
		}
		return a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
			votes := append([]events.Vote(nil), p.Votes...)
			d := aggregate.DeriveAB(rec.Spec, ev.Iteration, votes)
			rec.Votes, rec.Comparison, rec.Decided = votes, &d.Comparison, d.Decided
			if d.Decided != nil {
				rec.Judges = d.Decided.Judges
			}
			switch {
			case d.Blocked != "":
				rec.Status, rec.BlockStage, rec.BlockReason = aggregator.StatusBlocked, "judge", d.Blocked
			case d.Decided.Status == string(ab.StatusSchemaViolation):
				rec.Status = aggregator.StatusSchemaViolation
			default:
				rec.Status = aggregator.StatusCompared
			}
		})
	}
	return true
}

// submitted mirrors aggregator.submitted: the first job.submitted creates the record.
func (a *auditor) submitted(r *Recorded, p *events.JobSubmitted, link bool) {
	ev := r.Event
	if p.Spec.ACID != ev.JobID {
		// The aggregator refuses it for good; the job is never recorded.
		return
	}
	bk := batchKey{ev.Tenant, ev.BatchID}
	b := a.batch(bk)
	if b.size == 0 {
		b.size = p.BatchSize
	}
	key := jobKey{ev.Tenant, ev.BatchID, p.Spec.ACID}
	if a.jobs[key] != nil {
		return
	}
	rec := &aggregator.JobRecord{
		Tenant: ev.Tenant, Batch: ev.BatchID, ACID: p.Spec.ACID, Index: p.Index, BatchSize: p.BatchSize,
		BatchSource: p.BatchSource, Spec: p.Spec, Iteration: ev.Iteration, CorrelationID: ev.CorrelationID,
		SubmittedAt: ev.Time, Status: aggregator.StatusPending,
	}
	if link {
		rec.Inputs = []string{r.link()}
	}
	j := &simJob{rec: rec, submitted: r}
	a.jobs[key] = j
	b.jobs = append(b.jobs, j)
}

func (a *auditor) batch(bk batchKey) *simBatch {
	b := a.batches[bk]
	if b == nil {
		b = &simBatch{final: map[int]bool{}, redrives: map[int][]string{}}
		a.batches[bk] = b
	}
	return b
}

// decide mirrors aggregator.decide: a pending job becomes final once; its outputs and, when
// it completes the batch, the batch's follow. A redrive is the one exception: a blocked
// job (aggregator.Redrivable) is decided again by an event of a higher attempt, which
// resets its outcome, re-applies and extends its input chain, and from then on events of
// lower attempts are stale. It returns false when the job is not recorded yet.
func (a *auditor) decide(r *Recorded, ev events.Event, link bool, apply func(*aggregator.JobRecord)) bool {
	j := a.jobs[jobKey{ev.Tenant, ev.BatchID, ev.JobID}]
	if j == nil {
		return false
	}
	rec := j.rec
	if ev.Attempt < rec.Attempt {
		// Redelivered from an earlier attempt: the outcome belongs to the newer one.
		return true
	}
	redrive := ev.Attempt > rec.Attempt
	if rec.Final() && !(redrive && aggregator.Redrivable(rec)) {
		return true
	}
	cp := *rec
	if redrive {
		// The same fields aggregator.decide clears: Judges and Transcripts are
		// overwritten by apply where the new outcome has any.
		cp.Attempt, cp.Status, cp.BlockStage, cp.BlockReason = ev.Attempt, aggregator.StatusPending, "", ""
		cp.Decided, cp.Comparison, cp.Critic, cp.Equivalence, cp.Votes = nil, nil, nil, nil, nil
	}
	if !a.safely(r, func() { apply(&cp) }) {
		return true // the aggregator's update never happens
	}
	*rec = cp
	rec.DecidedBy = ev.ID
	if link {
		rec.Inputs = append(rec.Inputs, r.link())
	}
	a.jobOutputs(r, j, &ev.Envelope)
	b := a.batch(batchKey{rec.Tenant, rec.Batch})
	if rec.Attempt > 0 {
		if rec.Final() {
			a.redriven(r, b, rec)
		}
		return true
	}
	b.final[rec.Index] = true
	if len(b.completions) == 0 && b.size > 0 && countBelow(b.final, b.size) >= b.size {
		a.completed(r, b, 0)
	}
	return true
}

// redriven mirrors aggregator's redriven: a job of the redrive in progress has its new
// outcome; when it is the last one, the batch completes again for that attempt. A job
// of another attempt (a redrive that was superseded) completes nothing.
func (a *auditor) redriven(r *Recorded, b *simBatch, rec *aggregator.JobRecord) {
	if b.redrive == nil || b.redrive.attempt != rec.Attempt {
		return
	}
	i := indexOf(b.redrive.pending, rec.ACID)
	if i < 0 {
		return
	}
	b.redrive.pending = append(b.redrive.pending[:i:i], b.redrive.pending[i+1:]...)
	if len(b.redrive.pending) == 0 {
		a.completed(r, b, rec.Attempt)
	}
}

// completed records a completion of the batch for attempt, with the job records as the
// completing aggregator loads them (buildCompletion's LoadJobs).
func (a *auditor) completed(r *Recorded, b *simBatch, attempt int) {
	c := &simCompletion{attempt: attempt, by: r}
	for _, job := range b.jobs {
		data, err := json.Marshal(job.rec)
		if err == nil {
			c.snapshot = append(c.snapshot, data)
		}
	}
	b.completions = append(b.completions, c)
}

// redriveRequest follows `tribunal redrive` (client.Redrive) in stream order: its first
// render.requested of an attempt starts the redrive, as StartRedrive recorded it on the
// header, pending on every job of the attempt. Each request must be for a job the replay
// leaves blocked in a completed batch, the only jobs the client sends again.
func (a *auditor) redriveRequest(r *Recorded) {
	ev := r.Event
	b := a.batch(batchKey{ev.Tenant, ev.BatchID})
	if b.redrive == nil || b.redrive.attempt < ev.Attempt {
		b.redrive = &simRedrive{attempt: ev.Attempt, pending: append([]string(nil), b.redrives[ev.Attempt]...)}
	}
	j := a.jobs[jobKey{ev.Tenant, ev.BatchID, ev.JobID}]
	var why string
	switch {
	case j == nil:
		why = "its job is not recorded"
	case len(b.completions) == 0:
		why = "its batch has not completed"
	case !aggregator.Redrivable(j.rec):
		why = "the replay leaves its job " + j.rec.Status + ", not blocked"
	case j.rec.Attempt >= ev.Attempt:
		why = fmt.Sprintf("its job is at attempt %d already", j.rec.Attempt)
	}
	if why != "" {
		a.add(a.at(r, Mismatch{Kind: KindUnexplained, Field: "envelope.attempt", Recorded: fmt.Sprint(ev.Attempt),
			Detail: "a redrive request, but " + why + "; redrive sends only the blocked jobs of a completed batch"}))
	}
}

// isRedriveRequest reports whether r is a render request of `tribunal redrive`: an
// attempt above 0 and, by design, no causing event (client.Redrive publishes it from
// the job record, not from an event).
func isRedriveRequest(r *Recorded) bool {
	if r.History || !r.OK() || r.DeadLetter != "" || r.Event.Attempt == 0 || r.Event.CausationID != "" {
		return false
	}
	_, ok := r.Event.Payload.(*events.RenderRequested)
	return ok
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func countBelow(final map[int]bool, size int) int {
	n := 0
	for i := range final {
		if i >= 0 && i < size {
			n++
		}
	}
	return n
}

// safely runs a derivation. A derivation that panics in the aggregator (a verdict of a
// kind its job spec lacks) is recovered there and retried into dead letters, which the
// replay then shows; here it only leaves the record as it was.
func (a *auditor) safely(r *Recorded, f func()) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
			a.unverified(r, "applying "+string(r.Event.Type), fmt.Sprintf("the aggregator cannot apply it either (%v); it dead-letters it", p))
		}
	}()
	f()
	return true
}

// jobOutputs mirrors aggregator.jobOutputs: the events a final record stands for.
func (a *auditor) jobOutputs(r *Recorded, j *simJob, cause *events.Envelope) {
	rec := j.rec
	var p events.Payload
	switch {
	case rec.Status == aggregator.StatusBlocked:
		p = &events.JobBlocked{Kind: rec.Spec.Kind, ACID: rec.ACID, Stage: rec.BlockStage, Reason: rec.BlockReason}
	case rec.Decided != nil:
		d := *rec.Decided
		p = &d
	default:
		return
	}
	e := events.New(p, rec.Tenant, rec.Batch, rec.ACID, rec.Iteration, "", cause)
	e.CorrelationID = rec.CorrelationID
	ids := []string{e.ID}
	if rec.Spec.Kind == events.KindRubric {
		// Accept the final decision under its own step id too, should the aggregator
		// stop reusing the id of the view's first pending decision.
		ids = append(ids, events.NewID(e.Type, rec.Tenant, rec.Batch, rec.ACID, rec.Iteration, events.AttemptStep("final", e.Attempt)))
	}
	a.expect(expectation{ev: e, ids: ids, from: r, what: "final outcome"})
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

// deadLetter mirrors aggregator.DeadLetter: the job an abandoned event belongs to is
// blocked. The dead letter's bytes are the original event's, chained like any input.
func (a *auditor) deadLetter(r *Recorded) {
	if !r.OK() || r.Event.JobID == "" {
		return
	}
	ev := r.Event
	if p, ok := ev.Payload.(*events.JobSubmitted); ok {
		a.submitted(r, p, true)
	}
	a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
		rec.Status, rec.BlockStage = aggregator.StatusBlocked, r.DeadLetter
		rec.BlockReason = fmt.Sprintf("%s gave up on %s: %s", r.DeadLetter, ev.Type, r.Reason)
		if rec.Spec.Kind == events.KindAB {
			c := ab.Blocked(rec.ACID, aggregate.Pair(rec.Spec), ab.Assign(rec.ACID, rec.Iteration), rec.BlockReason)
			rec.Comparison = &c
		}
	})
}

// rubricOf reads and parses a view's rubric from blob storage, once per blob.
func (a *auditor) rubricOf(tenant string, rs *events.RubricSpec) (*argus.Rubric, error) {
	key := tenant + "/" + rs.Rubric.SHA256
	if c, ok := a.rubrics[key]; ok {
		return c.r, c.err
	}
	data, err := a.readBlob(tenant, rs.Rubric.SHA256)
	var r *argus.Rubric
	if err == nil {
		r, err = argus.ParseRubric(data)
	}
	if err != nil {
		err = fmt.Errorf("read rubric: %w", err)
	}
	a.rubrics[key] = cachedRubric{r, err}
	return r, err
}

type cachedRubric struct {
	r   *argus.Rubric
	err error
}

// rubricVote mirrors aggregator.rubricVote.
func (a *auditor) rubricVote(r *Recorded, ev events.Event, v events.RubricVote) bool {
	judgeName := v.Judge.Provider + "/" + v.Judge.Model
	if v.Status == "ok" {
		j := a.jobs[jobKey{ev.Tenant, ev.BatchID, ev.JobID}]
		if j == nil {
			return false
		}
		if j.rec.Spec.Rubric == nil {
			a.unverified(r, "rubric verdict", "its job is not a rubric view; the aggregator cannot apply it")
			return true
		}
		verdict, disagreed, verr := a.rubricVerdict(ev.Tenant, j.rec.Spec.Rubric, v)
		if verr == nil {
			render := v.Render
			return a.rubricStep(r, ev, step{verdict: verdict, disagreed: disagreed, render: &render, judge: judgeName})
		}
		if isBlobError(verr) {
			a.unverified(r, "rubric verdict", verr.Error())
		}
		v.Status, v.Error = "schema_violation", verr.Error()
	}
	return a.decide(r, ev, true, func(rec *aggregator.JobRecord) {
		rec.Judges = []string{judgeName}
		if v.Status == "unavailable" || v.Status == "blocked" {
			rec.Status, rec.BlockStage, rec.BlockReason = aggregator.StatusBlocked, "judge", fmt.Sprintf("judge unavailable (%s): %s", judgeName, v.Error)
			return
		}
		rec.Status, rec.BlockReason = aggregator.StatusSchemaViolation, fmt.Sprintf("%s (%s)", v.Error, judgeName)
		rec.Decided = &events.IterationDecided{Kind: events.KindRubric, ACID: rec.ACID, Status: aggregator.StatusSchemaViolation, Final: true}
	})
}

// rubricVerdict mirrors aggregator's rubricVerdict: the judge's all_pass and
// failed_dimensions are re-derived from its scores and the rubric's thresholds.
func (a *auditor) rubricVerdict(tenant string, rs *events.RubricSpec, v events.RubricVote) (*argus.Verdict, bool, error) {
	parsed, err := argus.ParseVerdict([]byte(v.Verdict))
	if err != nil {
		return nil, false, err
	}
	rubric, err := a.rubricOf(tenant, rs)
	if err != nil {
		return nil, false, err
	}
	chk, err := argus.NormalizeVerdict(*parsed, rubric)
	if err != nil {
		return nil, false, err
	}
	return &chk.Verdict, chk.Disagreed, nil
}

// rubricStep mirrors aggregator.rubricStep: the loop arithmetic on the view's state, then
// the decision for this batch. The view state is the fold of every loop step of the view
// replayed so far, in stream order, across batches.
func (a *auditor) rubricStep(r *Recorded, ev events.Event, st step) bool {
	key := jobKey{ev.Tenant, ev.BatchID, ev.JobID}
	j := a.jobs[key]
	if j == nil {
		return false
	}
	rec := j.rec
	if rec.Final() {
		return true
	}
	rs := rec.Spec.Rubric
	if rs == nil {
		a.unverified(r, "rubric loop step", "its job is not a rubric view; the aggregator cannot apply it")
		return true
	}
	if rec.Rubric != nil && ev.Iteration <= rec.Rubric.Handled {
		return true
	}
	rubric, err := a.rubricOf(ev.Tenant, rs)
	if err != nil {
		// The aggregator retries until it can read the rubric; the audit cannot follow.
		a.unverified(r, "rubric loop step", err.Error())
		return true
	}
	params := rubric.LoopParams()
	if rs.MaxIterations > 0 {
		params.MaxIterations = rs.MaxIterations
	}
	vkey := views.Key(ev.Tenant, rs)
	v := a.view(vkey)
	var d argus.Decision
	if v.LastApplied == ev.ID {
		d = v.LastDecision
	} else {
		d = v.Apply(ev.Tenant, rs, st.verdict, st.unchanged, st.render, params, signOffTime)
		v.LastApplied, v.LastDecision = ev.ID, d
		a.storeView(vkey, v)
	}
	signoff := v.SignOff
	dec := &events.RubricDecision{
		View: rs.Target + "/" + rs.State + "/" + rs.Appearance, LoopIteration: d.Iteration, FixDimensions: d.FixDimensions,
		FailingGates: st.gates, Frozen: d.Frozen, NewlyFrozen: d.NewlyFrozen, ConsecutivePasses: d.ConsecutivePasses, Unchanged: st.unchanged,
	}
	if st.verdict != nil {
		dec.AllPass, dec.FailedDimensions = st.verdict.AllPass, st.verdict.FailedDimensions
	}
	status := aggregator.StatusPending
	switch {
	case rs.Mode == events.ModeReportOnly:
		dec.Outcome, status = "reported", aggregator.StatusReported
	case d.ShouldSignoff:
		dec.Outcome, status = "signed_off", aggregator.StatusSignedOff
		if rs.Mode == events.ModeInteractive && a.firstSignoff(r, ev) {
			status = aggregator.StatusAwaitingSpotcheck
		}
	case d.BudgetExhausted:
		dec.Outcome, status = "budget_exhausted", aggregator.StatusBudgetExhausted
	case st.verdict != nil && st.verdict.AllPass || st.unchanged:
		dec.Outcome = "confirm"
	default:
		dec.Outcome, status = "fix", aggregator.StatusNeedsFixes
	}
	decided := &events.IterationDecided{Kind: events.KindRubric, ACID: rec.ACID, Status: status,
		Final: status != aggregator.StatusPending && status != aggregator.StatusAwaitingSpotcheck, Rubric: dec}
	if st.disagreed {
		decided.Disagreements = 1
	}
	var extra []expectation
	if status == aggregator.StatusSignedOff || status == aggregator.StatusAwaitingSpotcheck {
		so := signoffEvent(ev, signoff)
		so.Payload.(*events.SignoffRecorded).Digest = aggregator.ChainDigest(append(append([]string(nil), rec.Inputs...), r.link()))
		extra = append(extra, expectation{ev: so, ids: []string{so.ID}, from: r, what: "sign-off", skip: []string{"signed_off_at"}})
	}
	if status == aggregator.StatusPending || status == aggregator.StatusAwaitingSpotcheck {
		de := events.New(decided, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)
		a.expect(expectation{ev: de, ids: []string{de.ID}, from: r, what: "loop decision"})
		for _, e := range extra {
			a.expect(e)
		}
		if status == aggregator.StatusPending {
			spec := rec.Spec
			confirm := *spec.Rubric
			confirm.Confirm = true
			spec.Rubric = &confirm
			next := events.New(&events.RenderRequested{Spec: spec}, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration+1, "", &ev.Envelope)
			a.expect(expectation{ev: next, ids: []string{next.ID}, from: r, what: "confirmation render"})
		}
		if rec.Rubric == nil {
			rec.Rubric = &aggregator.RubricRecord{}
		}
		rec.Rubric.Handled, rec.Rubric.Decision = ev.Iteration, dec
		rec.Judges = addJudge(rec.Judges, st.judge)
		rec.Inputs = append(rec.Inputs, r.link())
		rec.Rubric.LastVerdict, rec.Rubric.Loop, rec.Rubric.SignOff, rec.Rubric.Render = v.LastVerdict, v.Loop, signoff, st.render
		if status == aggregator.StatusAwaitingSpotcheck {
			rec.Status = aggregator.StatusAwaitingSpotcheck
		}
		return true
	}
	a.decide(r, ev, true, func(jr *aggregator.JobRecord) {
		jr.Status = status
		if jr.Rubric == nil {
			jr.Rubric = &aggregator.RubricRecord{}
		}
		jr.Rubric.Handled, jr.Rubric.Decision, jr.Rubric.LastVerdict, jr.Rubric.Loop, jr.Rubric.SignOff, jr.Rubric.Render =
			ev.Iteration, dec, v.LastVerdict, v.Loop, signoff, st.render
		jr.Decided = decided
		jr.Judges = addJudge(jr.Judges, st.judge)
		if status == aggregator.StatusBudgetExhausted {
			jr.BlockStage, jr.BlockReason = "loop", fmt.Sprintf("iteration budget of %d spent without %d consecutive passes", d.MaxIterations, d.RequiredPasses)
		}
	})
	for _, e := range extra {
		a.expect(e)
	}
	return true
}

// firstSignoff stands for the aggregator's key-value race that picks the first sign-off
// of an interactive batch. The race leaves no event of its own, so the recorded decision
// that waits for a person names the winner; with none recorded, the first sign-off in
// stream order wins.
func (a *auditor) firstSignoff(r *Recorded, ev events.Event) bool {
	b := a.batch(batchKey{ev.Tenant, ev.BatchID})
	if b.spotJob == "" {
		b.spotJob = ev.JobID
		if len(b.awaiting) > 0 {
			b.spotJob = b.awaiting[0]
		}
		if !r.History {
			a.unverified(r, "which sign-off of the interactive batch waits for a person", "a key-value race decides it; taken from the recorded decision")
		}
	}
	return b.spotJob == ev.JobID
}

// spotcheck mirrors aggregator.spotcheck: a person's decision makes the waiting sign-off
// final.
func (a *auditor) spotcheck(r *Recorded, ev events.Event, p *events.SpotcheckRecorded) bool {
	value := argus.SpotcheckApproved
	if !p.Approved {
		value = p.Dimension
	}
	j := a.jobs[jobKey{ev.Tenant, ev.BatchID, p.ACID}]
	if j == nil {
		return false
	}
	if j.rec.Spec.Rubric == nil {
		return true
	}
	vkey := views.Key(ev.Tenant, j.rec.Spec.Rubric)
	v := a.view(vkey)
	if v.SignOff != nil && v.SignOff.HumanSpotcheck != value {
		so := *v.SignOff
		so.HumanSpotcheck = value
		v.SignOff = &so
		a.storeView(vkey, v)
	}
	target := ev
	target.JobID = p.ACID
	return a.decide(r, target, true, func(rec *aggregator.JobRecord) {
		rec.Status = aggregator.StatusSignedOff
		if rec.Rubric != nil && rec.Rubric.SignOff != nil {
			so := *rec.Rubric.SignOff
			so.HumanSpotcheck = value
			rec.Rubric.SignOff = &so
		}
		rec.Decided = &events.IterationDecided{Kind: events.KindRubric, ACID: rec.ACID, Status: aggregator.StatusSignedOff, Final: true, Rubric: rec.Rubric.Decision}
	})
}

// view returns a view's state as the aggregator would load it (a JSON round trip, as
// through the views bucket).
func (a *auditor) view(key string) views.Record {
	var v views.Record
	if data, ok := a.views[key]; ok {
		_ = json.Unmarshal(data, &v)
	}
	return v
}

// storeView keeps a view's state as the views bucket would.
func (a *auditor) storeView(key string, v views.Record) {
	if data, err := json.Marshal(v); err == nil {
		a.views[key] = data
	}
}

// signoffEvent mirrors the aggregator's sign-off announcement.
func signoffEvent(ev events.Event, so *argus.SignOff) events.Event {
	p := &events.SignoffRecorded{}
	if so != nil {
		p = &events.SignoffRecorded{Feature: so.Feature, Target: so.Target, State: so.State, Appearance: so.Appearance,
			Iterations: so.Iterations, ReferenceSource: so.ReferenceSource, HumanSpotcheck: so.HumanSpotcheck}
		if so.FinalVerdict != nil {
			data, _ := json.Marshal(so.FinalVerdict)
			p.FinalVerdict = string(data)
		}
	}
	return events.New(p, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)
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

func isBlobError(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "read rubric:")
}
