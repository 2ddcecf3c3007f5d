package aggregate

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/critic"
	"github.com/tribunal-dev/tribunal/pkg/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Job outcome statuses shared by every kind.
const (
	StatusCompared        = "compared"
	StatusBlocked         = "blocked"
	StatusSchemaViolation = "schema_violation"
)

// CriticDecision is what the aggregator derives for a critic job.
type CriticDecision struct {
	Status  string
	Blocked string
	Result  critic.Result
	Decided *events.IterationDecided
}

// DeriveCritic re-derives quality and verdict from the judge's three scores, whatever the
// judge claimed, and counts the claims that disagree.
func DeriveCritic(spec events.JobSpec, v *events.CriticVote) CriticDecision {
	judge := v.Judge.Provider + "/" + v.Judge.Model
	d := CriticDecision{Decided: &events.IterationDecided{Kind: events.KindCritic, ACID: spec.ACID, Final: true, Judges: []string{judge}}}
	switch v.Status {
	case "unavailable":
		d.Status, d.Blocked = StatusBlocked, fmt.Sprintf("judge unavailable (%s): %s", judge, v.Error)
		d.Result = critic.Blocked(d.Blocked)
		return d
	case "blocked":
		d.Status, d.Blocked = StatusBlocked, v.Error
		d.Result = critic.Blocked(v.Error)
		return d
	case "ok":
		r, err := critic.Check(critic.Answer{Correctness: v.Correctness, Slop: v.Slop, Scope: v.Scope, Rationale: v.Rationale,
			Verdict: v.ClaimedVerdict, Quality: v.ClaimedQuality})
		if err == nil {
			d.Status, d.Result = StatusCompared, r
			d.Decided.Status = StatusCompared
			d.Decided.Disagreements = r.Disagreements
			d.Decided.Critic = &events.CriticResult{Correctness: r.Correctness, Slop: r.Slop, Scope: r.Scope, Quality: r.Quality,
				Verdict: r.Verdict, Rationale: r.Rationale, Disagreements: r.Disagreements}
			return d
		}
		v.Error = err.Error()
	}
	d.Status = StatusSchemaViolation
	d.Result = critic.SchemaViolation(fmt.Sprintf("%s (%s)", v.Error, judge))
	d.Decided.Status = StatusSchemaViolation
	return d
}

// EquivalenceDecision is what the aggregator derives for an equivalence job.
type EquivalenceDecision struct {
	Status  string
	Blocked string
	Report  equivalence.Report
	Decided *events.IterationDecided
}

// DeriveEquivalence builds the seed's output (cases and summary, pass iff no case
// regressed) plus the coverage flag and the efficiency report, from the per-case answers.
func DeriveEquivalence(spec events.JobSpec, votes []events.CaseVote) EquivalenceDecision {
	es := spec.Equivalence
	set := make([]equivalence.TransferCase, len(es.Cases))
	for i, c := range es.Cases {
		set[i] = equivalence.TransferCase{ID: c.ID, Input: c.Input, Tag: c.Tag}
	}
	var results []equivalence.CaseResult
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
		case "ok":
			results = append(results, equivalence.OK(v.CaseID, equivalence.Answer{Verdict: v.Verdict, BehaviourDelta: v.BehaviourDelta,
				EfficiencySignal: equivalence.EfficiencySignal{OriginalDirectness: v.Efficiency.OriginalDirectness,
					CandidateDirectness: v.Efficiency.CandidateDirectness, InterpretationNotes: v.Efficiency.InterpretationNotes}}))
		case "unavailable":
			unavailable = fmt.Sprintf("judge unavailable (%s) on case %s: %s", name, v.CaseID, v.Error)
			results = append(results, equivalence.Blocked(v.CaseID, "judge unavailable: "+v.Error))
		case "blocked":
			results = append(results, equivalence.Blocked(v.CaseID, v.Error))
		default:
			results = append(results, equivalence.SchemaViolation(v.CaseID, v.Error))
		}
	}
	minCases := es.MinCases
	rep := equivalence.NewReport(set, results, minCases)
	d := EquivalenceDecision{Report: rep, Decided: &events.IterationDecided{Kind: events.KindEquivalence, ACID: spec.ACID, Final: true, Judges: judges}}
	if unavailable != "" {
		d.Status, d.Blocked = StatusBlocked, unavailable
		return d
	}
	d.Status = StatusCompared
	if rep.Summary.SchemaViolations > 0 {
		d.Status = StatusSchemaViolation
	}
	d.Decided.Status = d.Status
	er := &events.EquivalenceResult{Pass: rep.Summary.Pass, Regressions: rep.Summary.Regressions, Divergences: rep.Summary.Divergences,
		Equivalents: rep.Summary.Equivalents, Invalid: rep.Summary.SchemaViolations + rep.Summary.Blocked,
		Coverage: events.Coverage{Complete: rep.Coverage.Complete, MissingTags: rep.Coverage.MissingTags, Cases: rep.Coverage.Cases, MinCases: rep.Coverage.MinCases},
		Cases:    votes}
	d.Decided.Equivalence = er
	return d
}
