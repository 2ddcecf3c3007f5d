package equivalence

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Decision is what the aggregator derives for an equivalence job.
type Decision struct {
	Status  events.Status
	Blocked string
	Report  Report
	Decided *events.IterationDecided
}

// Derive builds the seed's output (cases and summary, pass iff no case
// regressed) plus the coverage flag and the efficiency report, from the per-case answers.
func Derive(spec events.JobSpec, votes []events.CaseVote) Decision {
	if repeatedCases(spec, votes) {
		return deriveTrials(spec, votes)
	}
	return deriveOnce(spec, votes)
}

// deriveOnce derives one asking: one answer per case.
func deriveOnce(spec events.JobSpec, votes []events.CaseVote) Decision {
	es := SpecOf(spec.KindPart)
	set := make([]TransferCase, len(es.Cases))
	for i, c := range es.Cases {
		set[i] = TransferCase{ID: c.ID, Input: c.Input, Tag: c.Tag}
	}
	var results []CaseResult
	judges := []string{}
	seen := map[string]bool{}
	unavailable := ""
	for _, v := range votes {
		name := v.Judge.Provider + "/" + v.Judge.Model
		if !seen[name] {
			seen[name] = true
			judges = append(judges, name)
		}
		switch v.Status {
		case events.VoteOK:
			results = append(results, OK(v.CaseID, Answer{Verdict: v.Verdict, BehaviourDelta: v.BehaviourDelta,
				EfficiencySignal: EfficiencySignal{OriginalDirectness: v.Efficiency.OriginalDirectness,
					CandidateDirectness: v.Efficiency.CandidateDirectness, InterpretationNotes: v.Efficiency.InterpretationNotes}}))
		case events.VoteUnavailable:
			unavailable = fmt.Sprintf("judge unavailable (%s) on case %s: %s", name, v.CaseID, v.Error)
			results = append(results, Blocked(v.CaseID, "judge unavailable: "+v.Error))
		case events.VoteBlocked:
			results = append(results, Blocked(v.CaseID, v.Error))
		default:
			results = append(results, SchemaViolation(v.CaseID, v.Error))
		}
	}
	minCases := es.MinCases
	rep := NewReport(set, results, minCases)
	d := Decision{Report: rep, Decided: &events.IterationDecided{Kind: events.KindEquivalence, ACID: spec.ACID, Final: true, Judges: judges}}
	if unavailable != "" {
		d.Status, d.Blocked = events.StatusBlocked, unavailable
		return d
	}
	d.Status = events.StatusCompared
	if rep.Summary.SchemaViolations > 0 {
		d.Status = events.StatusSchemaViolation
	}
	d.Decided.Status = d.Status
	er := &Decided{Pass: rep.Summary.Pass, Regressions: rep.Summary.Regressions, Divergences: rep.Summary.Divergences,
		Equivalents: rep.Summary.Equivalents, Invalid: rep.Summary.SchemaViolations + rep.Summary.Blocked,
		Coverage: events.Coverage{Complete: rep.Coverage.Complete, MissingTags: rep.Coverage.MissingTags, Cases: rep.Coverage.Cases, MinCases: rep.Coverage.MinCases},
		Cases:    votes}
	d.Decided.KindPart = er
	return d
}
