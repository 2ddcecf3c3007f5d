package equivalence

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

var _ kind.Calling = Kind{}

// RunnerLabel starts the label of a runner call among a job's calls ("runner original/C1"),
// telling it from the judge's, which are labelled by the case's id alone.
const RunnerLabel = "runner "

// Calls implements kind.Calling: one call per case, labelled by the case's id, then the
// runner's calls the transcripts came from (events.VerdictEmitted.Runs), so that the job's
// cost includes them at the runner model's price. A transcript taken from the baseline
// cache or the candidate cache is a cache hit that saved its first run's cost; a teacher
// transcript handed in with the batch was no call of tribunal's and is not listed.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	out := make([]records.Call, 0, len(v.Cases)+len(v.Runs))
	for _, c := range v.Cases {
		out = append(out, records.CallOf(c.CaseID, c.Status, c.Judge))
	}
	for _, r := range v.Runs {
		ji := r.Runner.Judge
		if ji.Provider == ImportedRunner {
			continue
		}
		if r.Runner.Baseline || ji.Cached {
			// Reused, not asked again: what it saved is what its first run cost.
			ji.Cached, ji.SavedNanos = true, ji.SavedNanos+ji.CostNanos
		}
		out = append(out, records.CallOf(RunnerLabel+r.Side+"/"+r.CaseID, events.VoteOK, ji))
	}
	return out
}

var _ trust.JudgeCalling = Kind{}

// JudgeCalls implements trust.JudgeCalling: the judge's calls of a verdict, one per case,
// without the runners' (which the renderer asks, and which are no judge's answers), for
// the trust report's costs.
func (Kind) JudgeCalls(v *events.VerdictEmitted) []records.Call {
	out := make([]records.Call, 0, len(v.Cases))
	for _, c := range v.Cases {
		out = append(out, records.CallOf(c.CaseID, c.Status, c.Judge))
	}
	return out
}
