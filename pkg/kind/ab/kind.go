package ab

import (
	"fmt"
	"math"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Kind is the `ab` judge kind.
type Kind struct{}

var _ kind.Kind = Kind{}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindAB }

// Result is an ab job's derived result, kept on its record: the comparison in the seed's
// manifest shape and the votes it was derived from.
type Result struct {
	Comparison Comparison    `json:"comparison"`
	Votes      []events.Vote `json:"votes,omitempty"`
}

// ResultOf reads an ab job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "ab result")
}

func setResult(j *records.Job, r Result) error { return kind.Marshal(j, &j.Result, "ab result", r) }

// Decide implements kind.Kind: the votes are un-shuffled and combined (Derive), never
// trusting anything but each vote's raw answer.
func (Kind) Decide(st *kind.Step) error {
	v, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok {
		return fmt.Errorf("%w: an ab job takes verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	j := st.Job
	if SpecOf(j.Spec.KindPart) == nil {
		return fmt.Errorf("%w: job %s has no ab spec", kind.ErrNotForKind, j.Key())
	}
	d := Derive(j.Spec, st.Event.Iteration, v.Votes)
	j.Decided = d.Decided
	if d.Decided != nil {
		j.Judges = d.Decided.Judges
	}
	switch {
	case d.Blocked != "":
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", d.Blocked
	case d.Decided.Status == events.StatusSchemaViolation:
		j.Status = events.StatusSchemaViolation
	default:
		j.Status = events.StatusCompared
	}
	return setResult(j, Result{Comparison: d.Comparison, Votes: v.Votes})
}

// Blocked implements kind.Kind: a blocked comparison keeps its place in the manifest.
func (Kind) Blocked(j *records.Job) {
	c := Blocked(j.ACID, PairOf(j.Spec), Assign(j.ACID, j.Iteration), j.BlockReason)
	_ = setResult(j, Result{Comparison: c})
}

// Outcome implements kind.Kind: a comparison's outcome against its threshold.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	r, err := ResultOf(j)
	if err != nil || r == nil || j.Status != events.StatusCompared {
		return kind.OutcomeSchemaViolation
	}
	return r.Comparison.Outcome(threshold(j))
}

func threshold(j *records.Job) float64 {
	if SpecOf(j.Spec.KindPart) != nil {
		return SpecOf(j.Spec.KindPart).Threshold
	}
	return DefaultThreshold
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	if d := j.Decided; d != nil && DecidedOf(d.KindPart) != nil {
		a := DecidedOf(d.KindPart)
		row.Winner, row.Tag, row.Impact, row.LabelAssignment, row.RawWinner, row.BiggestGap, row.Agreement =
			a.Winner, a.Tag, a.Impact, a.LabelAssignment, a.RawWinner, a.BiggestGap, a.Agreement
		row.Consistent = a.Consistent
		if a.BiggestGap != "" {
			if as, err := ParseAssignment(a.LabelAssignment); err == nil {
				row.Slots = as.Legend()
			}
		}
		if j.Status == events.StatusCompared {
			// A panel's mean is a float sum ((0.8+0.9)/2 = 0.8500000000000001): people
			// read it rounded; the manifest and the decision keep the exact value.
			c := math.Round(a.Confidence*1e4) / 1e4
			row.Confidence = &c
		}
	}
	r, _ := ResultOf(j)
	if r == nil {
		return row
	}
	if j.Status == events.StatusSchemaViolation {
		row.Reason = r.Comparison.BlockedReason
	}
	names := strings.Split(row.Judge, ",")
	if row.Judge == "" {
		names = nil
	}
	for _, v := range r.Votes {
		names = kind.AddJudge(names, kind.JudgeName(v.Judge))
		row.Cached = row.Cached || v.Judge.Cached
		row.AddSampling(v.Judge)
	}
	row.Judge = strings.Join(names, ",")
	return row
}

// Estimate implements kind.Kind: one call per panel model, twice with a position swap,
// times the trials; a ladder is one rung at least and every rung at most.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	if SpecOf(spec.KindPart) == nil {
		return kind.Estimate{}
	}
	e := kind.Estimate{Sources: []kind.Source{{Role: string(Ours), Src: SpecOf(spec.KindPart).Ours}, {Role: string(Reference), Src: SpecOf(spec.KindPart).Reference}},
		Judges: SpecOf(spec.KindPart).Judges, Positions: firstNonEmpty(SpecOf(spec.KindPart).Positions, "single")}
	e.JudgeCalls = max(len(e.Judges), 1)
	e.MaxJudgeCalls = e.JudgeCalls
	switch e.Positions {
	case events.PositionsSwap:
		e.JudgeCalls *= 2
		e.MaxJudgeCalls = e.JudgeCalls
	case events.PositionsAuto:
		// One order at least; both for a judge that has not shown a low flip rate or
		// an answer below the confidence rule.
		e.MaxJudgeCalls *= 2
	}
	if r := spec.Repeats; r != nil {
		// Every trial asks again; a ladder asks its first rung at least and, in the worst
		// case, every rung.
		if n := len(r.Ladder); n > 0 {
			e.JudgeCalls, e.MaxJudgeCalls = e.JudgeCalls/max(len(e.Judges), 1), e.MaxJudgeCalls/max(len(e.Judges), 1)*n
			// The least it costs is the first rung's calls, priced at its model.
			e.Judges, e.Ladder = r.Ladder[:1], r.Ladder
		}
		e.JudgeCalls *= r.K()
		e.MaxJudgeCalls *= r.K()
	}
	return e
}

// SlotLegend implements kind.Unblinding: a call in order "BA" saw the slots exchanged.
func (Kind) SlotLegend(j *records.Job, c records.Call) string {
	as := Assign(j.ACID, j.Iteration)
	if d := j.Decided; d != nil && DecidedOf(d.KindPart) != nil {
		if parsed, err := ParseAssignment(DecidedOf(d.KindPart).LabelAssignment); err == nil {
			as = parsed
		}
	}
	if c.Label == "BA" {
		as = as.Swapped()
	}
	return as.Legend()
}
