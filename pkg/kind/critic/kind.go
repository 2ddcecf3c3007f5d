package critic

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Kind is the `critic` judge kind.
type Kind struct{}

var _ kind.Kind = Kind{}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindCritic }

// ResultOf reads a critic job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "critic result")
}

func setResult(j *records.Job, r Result) error { return kind.Marshal(j, &j.Result, "critic result", r) }

// Decide implements kind.Kind: quality and verdict are re-derived from the judge's three
// scores, whatever the judge claimed, and the claims that disagree are counted.
func (Kind) Decide(st *kind.Step) error {
	ve, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok || VoteOf(ve.KindPart) == nil {
		return fmt.Errorf("%w: a critic job takes critic verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	if len(TrialsOf(ve.KindTrials)) > 0 || st.Job.Spec.Repeats.K() > 1 {
		return decideTrials(st, ve)
	}
	j, v := st.Job, *VoteOf(ve.KindPart)
	name := kind.JudgeName(v.Judge)
	j.Judges = []string{name}
	j.Decided = &events.IterationDecided{Kind: events.KindCritic, ACID: j.ACID, Final: true, Judges: []string{name}}
	switch v.Status {
	case events.VoteUnavailable:
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", fmt.Sprintf("judge unavailable (%s): %s", name, v.Error)
		return setResult(j, Blocked(j.BlockReason))
	case events.VoteBlocked:
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", v.Error
		return setResult(j, Blocked(v.Error))
	case events.VoteOK:
		r, err := Check(Answer{Correctness: v.Correctness, Slop: v.Slop, Scope: v.Scope, Rationale: v.Rationale,
			Verdict: v.ClaimedVerdict, Quality: v.ClaimedQuality})
		if err == nil {
			j.Status = events.StatusCompared
			j.Decided.Status, j.Decided.Disagreements = events.StatusCompared, r.Disagreements
			j.Decided.KindPart = &Decided{Correctness: r.Correctness, Slop: r.Slop, Scope: r.Scope, Quality: r.Quality,
				Verdict: r.Verdict, Rationale: r.Rationale, Disagreements: r.Disagreements}
			return setResult(j, r)
		}
		v.Error = err.Error()
	}
	j.Status = events.StatusSchemaViolation
	j.Decided.Status = events.StatusSchemaViolation
	return setResult(j, SchemaViolation(fmt.Sprintf("%s (%s)", v.Error, name)))
}

// Blocked implements kind.Kind.
func (Kind) Blocked(j *records.Job) { _ = setResult(j, Blocked(j.BlockReason)) }

// Outcome implements kind.Kind: only a pass is clean.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	if r, err := ResultOf(j); err == nil && r != nil && r.Verdict == VerdictPass {
		return kind.OutcomeClean
	}
	return kind.OutcomeFinding
}

// Manifest implements kind.Kind: one result per AC, in batch order.
func (Kind) Manifest(_, batch string) kind.Manifest {
	return kind.NewListFold(events.KindCritic, batch, func(j *records.Job) ManifestRow {
		r, _ := ResultOf(j)
		return ManifestRow{ManifestEntry: kind.EntryOf(j), Critic: r}
	})
}

// Manifest is the critic kind's manifest: one result per AC, in batch order.
type Manifest = kind.ListManifest[ManifestRow]

// ManifestRow is one AC of the critic manifest.
type ManifestRow struct {
	kind.ManifestEntry
	Critic *Result `json:"critic,omitempty"`
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	c, _ := ResultOf(j)
	if c == nil {
		return row
	}
	if c.Verdict != "" {
		q := c.Quality
		row.Verdict, row.Quality = c.Verdict, &q
		row.Detail = fmt.Sprintf("correctness %d, slop %d, scope %d: %s", c.Correctness, c.Slop, c.Scope, c.Rationale)
	} else if row.Reason == "" {
		row.Reason = c.Reason
	}
	return row
}

// Estimate implements kind.Kind: one scoring call.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	if SpecOf(spec.KindPart) == nil {
		return kind.Estimate{}
	}
	// One call per trial.
	k := spec.Repeats.K()
	return kind.Estimate{Sources: []kind.Source{{Role: "output", Src: SpecOf(spec.KindPart).Output}}, JudgeCalls: k, MaxJudgeCalls: k}
}
