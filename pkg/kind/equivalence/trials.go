package equivalence

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// repeatedCases reports whether a job was judged with trials: on its spec, or in its
// recorded answers.
func repeatedCases(spec events.JobSpec, votes []events.CaseVote) bool {
	if spec.Repeats.K() > 1 {
		return true
	}
	for _, v := range votes {
		if v.Trial > 0 {
			return true
		}
	}
	return false
}

// Job-level answers of a trial, as TrialsResult records them.
const (
	trialPass    = "pass"
	trialFail    = "fail"
	trialBlocked = "blocked"
)

// deriveTrials derives a job judged with k trials. Each case's verdict is its trials'
// majority (trials.Majority with at_least); a case whose trials fall short, or any of
// whose trials has no valid answer, is that case's failure, which never lets the summary
// pass (a split case is blocked with the reason, never read as equivalent). The report
// is then derived from one answer per case as for a single asking, and the job's trials
// record each trial's own summary (pass or fail over its answers alone) and their
// agreement with the reduced one.
func deriveTrials(spec events.JobSpec, votes []events.CaseVote) Decision {
	k, atLeast := spec.Repeats.K(), 0
	if spec.Repeats != nil {
		atLeast = spec.Repeats.AtLeast
	}
	var order []string
	byCase := map[string][]events.CaseVote{}
	byTrial := map[int][]events.CaseVote{}
	for _, v := range votes {
		if _, seen := byCase[v.CaseID]; !seen {
			order = append(order, v.CaseID)
		}
		byCase[v.CaseID] = append(byCase[v.CaseID], v)
		byTrial[v.Trial] = append(byTrial[v.Trial], v)
		k = max(k, v.Trial+1)
	}
	var reduced []events.CaseVote
	for _, id := range order {
		reduced = append(reduced, reduceCase(id, byCase[id], k, atLeast))
	}
	d := deriveOnce(spec, reduced)
	answers := make([]string, k)
	for t := range k {
		answers[t] = summaryOf(deriveOnce(spec, byTrial[t]))
	}
	tr := trials.Agreeing(trials.ReducerMajority, answers, summaryOf(d))
	tr.AtLeast = trials.Needed(k, atLeast)
	d.Decided.Trials = &tr
	if DecidedOf(d.Decided.KindPart) != nil {
		// Every trial's answers, as the verdict event recorded them.
		DecidedOf(d.Decided.KindPart).Cases = votes
	}
	return d
}

// reduceCase is one case's answer over its trials: the first failing trial's (an
// outage, a refusal, an invalid answer), else the first answer with the majority
// verdict, else a blocked answer saying the trials disagreed.
func reduceCase(id string, vs []events.CaseVote, k, atLeast int) events.CaseVote {
	byTrial := map[int]events.CaseVote{}
	for _, v := range vs {
		byTrial[v.Trial] = v
	}
	verdicts := make([]string, k)
	for t := range k {
		v, ok := byTrial[t]
		if !ok {
			return events.CaseVote{CaseID: id, Status: events.VoteBlocked, Error: fmt.Sprintf("trial %d of %d has no recorded answer", t+1, k)}
		}
		if v.Status != events.VoteOK {
			v.Error = fmt.Sprintf("trial %d of %d: %s", t+1, k, v.Error)
			return v
		}
		verdicts[t] = v.Verdict
	}
	r := trials.Majority(verdicts, atLeast)
	if r.Unsure != "" {
		v := byTrial[0]
		return events.CaseVote{CaseID: id, Judge: v.Judge, Status: events.VoteBlocked, Error: r.Unsure}
	}
	for t := range k {
		if byTrial[t].Verdict == r.Answer {
			return byTrial[t]
		}
	}
	return byTrial[0]
}

func summaryOf(d Decision) string {
	switch {
	case d.Blocked != "" || d.Status != events.StatusCompared:
		return trialBlocked
	case d.Report.Summary.Pass:
		return trialPass
	}
	return trialFail
}
