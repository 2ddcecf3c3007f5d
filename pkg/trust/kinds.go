package trust

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// What a kind supplies to the trust figures. Each is an optional interface of a kind's
// rules (kind.Kind): package collect looks a job's or a verdict's kind up and asks it,
// so the figures name no kind and a new kind brings its own part from its folder.

// Pairwise is a kind whose judge compares our artifact with a reference shown in two
// blind slots, answering in slots that un-shuffle to a Winner (ab). Its jobs are the
// report's outcomes and judgments: the position bias, flips, length sensitivity and
// panel agreement are theirs.
type Pairwise interface {
	// PairOutcome is a final job's outcome: its winner when it was compared, blocked
	// otherwise (no valid verdict).
	PairOutcome(j *records.Job) Outcome
	// PairJudgments are the calls of the verdict the job's outcome was derived from, each
	// un-shuffled to roles, with the artifacts' lengths l; none when it has no result.
	PairJudgments(j *records.Job, l Lengths) []Judgment
	// PairLengths are the lengths of a rendered job's two artifacts; ok is false when
	// they have no length that means anything to a reader (not both text).
	PairLengths(rd *events.RenderDone) (l Lengths, ok bool)
}

// Lengths are the lengths of a pairwise job's two artifacts, 0 when unknown.
type Lengths struct{ Ours, Reference int }

// Dimensioned is a kind whose verdicts grade named dimensions, the ones a person's HE-2
// spot check may name as wrong (rubric): the spot-check figures report every dimension
// its valid verdicts graded.
type Dimensioned interface {
	// Dimensions are the names of the dimensions a valid verdict graded, in any order;
	// none for a verdict without a valid answer.
	Dimensions(v *events.VerdictEmitted) []string
}

// JudgeCalling is a kind some of whose recorded calls (kind.Calling) are not its judge's:
// equivalence's runners, which the renderer asks. The cost figures are the judges', so
// such a kind lists its judge's calls alone; the others' kind.Calling is read.
type JudgeCalling interface {
	JudgeCalls(v *events.VerdictEmitted) []records.Call
}
