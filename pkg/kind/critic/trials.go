package critic

import (
	"fmt"
	"math"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// MedianScores reduces k trials' scores to one answer: the median of each axis. With an
// even k the median of an axis may fall between two whole scores; it is taken toward the
// stricter side (down for correctness and scope, up for slop), so trials that split never
// pass an output that half of them would not.
func MedianScores(scores [][3]int) (correctness, slop, scope int) {
	axis := func(i int) float64 {
		xs := make([]float64, len(scores))
		for t, s := range scores {
			xs[t] = float64(s[i])
		}
		return trials.Median(xs)
	}
	return int(math.Floor(axis(0))), int(math.Ceil(axis(1))), int(math.Floor(axis(2)))
}

// decideTrials is Decide for a job judged with trials: every trial must have answered
// validly (an outage or a schema violation in one is the job's, naming the trial); the
// scores are reduced by MedianScores and quality and verdict derived from them as for one
// answer. The trials' own verdicts, each derived from its scores, are recorded with their
// agreement with the reduced verdict; with at_least, a verdict fewer trials reached
// blocks the job with the reason.
func decideTrials(st *kind.Step, ve *events.VerdictEmitted) error {
	j := st.Job
	all := append([]Vote{*VoteOf(ve.KindPart)}, TrialsOf(ve.KindTrials)...)
	k := max(j.Spec.Repeats.K(), len(all))
	name := kind.JudgeName(all[0].Judge)
	j.Judges = []string{name}
	j.Decided = &events.IterationDecided{Kind: events.KindCritic, ACID: j.ACID, Final: true, Judges: []string{name}}
	block := func(reason string) error {
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", reason
		return setResult(j, Blocked(reason))
	}
	if len(all) < k {
		return block(fmt.Sprintf("trial %d of %d has no recorded answer", len(all)+1, k))
	}
	var scores [][3]int
	var verdicts []string
	var results []Result
	for t, v := range all {
		n := kind.JudgeName(v.Judge)
		switch v.Status {
		case events.VoteUnavailable:
			return block(fmt.Sprintf("trial %d of %d: judge unavailable (%s): %s", t+1, k, n, v.Error))
		case events.VoteBlocked:
			return block(fmt.Sprintf("trial %d of %d: %s", t+1, k, v.Error))
		case events.VoteOK:
			r, err := Check(Answer{Correctness: v.Correctness, Slop: v.Slop, Scope: v.Scope, Rationale: v.Rationale,
				Verdict: v.ClaimedVerdict, Quality: v.ClaimedQuality})
			if err == nil {
				scores = append(scores, [3]int{v.Correctness, v.Slop, v.Scope})
				verdicts = append(verdicts, r.Verdict)
				results = append(results, r)
				continue
			}
			v.Error = err.Error()
		}
		j.Status, j.Decided.Status = events.StatusSchemaViolation, events.StatusSchemaViolation
		return setResult(j, SchemaViolation(fmt.Sprintf("trial %d of %d: %s (%s)", t+1, k, v.Error, n)))
	}
	c, s, sc := MedianScores(scores)
	q, verdict := Derive(c, s, sc)
	tr := trials.Agreeing(trials.ReducerMedian, verdicts, verdict)
	tr.AtLeast = j.Spec.Repeats.AtLeast
	j.Decided.Trials = &tr
	if tr.AtLeast > 0 && tr.For < tr.AtLeast {
		tr.Unsure = fmt.Sprintf("trials disagree: the median verdict %q has %d of %d trials, and it needs %d (at_least)", verdict, tr.For, k, tr.AtLeast)
		j.Decided.Status = events.StatusBlocked
		return block(tr.Unsure)
	}
	// The rationale and the judge's claims are those of the first trial whose own verdict
	// is the reduced one (there may be none: medians of split scores).
	r := Result{Status: StatusOK, Correctness: c, Slop: s, Scope: sc, Quality: q, Verdict: verdict}
	for _, t := range results {
		if t.Verdict == verdict {
			r.Rationale, r.ClaimedVerdict, r.ClaimedQuality = t.Rationale, t.ClaimedVerdict, t.ClaimedQuality
			r.Disagreements, r.DisagreementFields = t.Disagreements, t.DisagreementFields
			break
		}
	}
	if r.Rationale == "" {
		r.Rationale = results[0].Rationale
	}
	j.Status = events.StatusCompared
	j.Decided.Status, j.Decided.Disagreements = events.StatusCompared, r.Disagreements
	j.Decided.KindPart = &Decided{Correctness: c, Slop: s, Scope: sc, Quality: q, Verdict: verdict, Rationale: r.Rationale, Disagreements: r.Disagreements}
	return setResult(j, r)
}
