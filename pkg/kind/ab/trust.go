package ab

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// ab is the pairwise kind of the trust figures: its votes are the report's judgments, its
// final jobs the report's outcomes (package trust).
var _ trust.Pairwise = Kind{}

// PairOutcome implements trust.Pairwise: a final ab job's derived winner when it was
// compared, blocked otherwise (blocked before or by the judge, or a schema violation: no
// valid verdict).
func (Kind) PairOutcome(j *records.Job) trust.Outcome {
	o := trust.Outcome{AC: j.ACID}
	if j.Status != events.StatusCompared || j.Decided == nil || DecidedOf(j.Decided.KindPart) == nil {
		o.Blocked = true
		return o
	}
	o.Winner = trust.Winner(DecidedOf(j.Decided.KindPart).Winner)
	return o
}

// PairJudgments implements trust.Pairwise: the votes of the verdict an ab job's outcome
// was derived from, each un-shuffled under the assignment it was judged with (a swapped
// call under the swapped one), with the artifacts' lengths.
func (Kind) PairJudgments(j *records.Job, l trust.Lengths) []trust.Judgment {
	r, err := ResultOf(j)
	if err != nil || r == nil {
		return nil
	}
	assign := r.Comparison.LabelAssignment
	if !assign.Valid() {
		assign = Assign(j.ACID, j.Iteration)
	}
	var out []trust.Judgment
	for _, v := range r.Votes {
		a := assign
		order := v.Order
		if order == trust.OrderSwapped {
			a = a.Swapped()
		} else {
			order = trust.OrderShown
		}
		jd := trust.Judgment{AC: j.ACID, Judge: kind.JudgeName(v.Judge), Order: order, Status: string(v.Status),
			RawWinner: v.RawWinner, Confidence: v.Confidence, LenOurs: l.Ours, LenRef: l.Reference, Trial: v.Trial}
		if v.Status == events.VoteOK {
			jd.Winner = trust.Winner(Unshuffle(v.RawWinner, a))
		}
		out = append(out, jd)
	}
	return out
}

// PairLengths implements trust.Pairwise: the blob sizes in bytes of a render's two
// artifacts when both are text (images and HTML have no length that means anything to a
// reader).
func (Kind) PairLengths(rd *events.RenderDone) (trust.Lengths, bool) {
	o, ok1 := rd.Artifacts[string(Ours)]
	r, ok2 := rd.Artifacts[string(Reference)]
	if !ok1 || !ok2 || o.Class != "text" || r.Class != "text" {
		return trust.Lengths{}, false
	}
	return trust.Lengths{Ours: int(o.Blob.Size), Reference: int(r.Blob.Size)}, true
}
