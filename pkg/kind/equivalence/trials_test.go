package equivalence

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestDeriveTrials: each case's verdict is its trials' majority; a case whose trials
// split has no verdict (blocked with the reason) and the summary cannot pass; the job's
// trials record each trial's own summary.
func TestDeriveTrials(t *testing.T) {
	spec := events.JobSpec{Kind: events.KindEquivalence, ACID: "AC-1", Repeats: &events.Repeats{Trials: 3},
		KindPart: &Spec{Cases: []events.Case{{ID: "c1", Input: "x", Tag: "happy"}, {ID: "c2", Input: "y", Tag: "edge"}}}}
	vote := func(id, verdict string, trial int) events.CaseVote {
		v := events.CaseVote{CaseID: id, Judge: events.JudgeInfo{Provider: "openai", Model: "m"}, Status: events.VoteOK, Verdict: verdict, Trial: trial,
			Efficiency: events.EfficiencySignal{OriginalDirectness: 3, CandidateDirectness: 3, InterpretationNotes: "same"}}
		if verdict != VerdictEquivalent {
			v.BehaviourDelta = "skips a step"
		}
		return v
	}
	var votes []events.CaseVote
	for i, pair := range [][2]string{{VerdictEquivalent, VerdictEquivalent}, {VerdictEquivalent, VerdictDiverged}, {VerdictRegressed, VerdictEquivalent}} {
		votes = append(votes, vote("c1", pair[0], i), vote("c2", pair[1], i))
	}
	d := Derive(spec, votes)
	if d.Decided == nil || d.Decided.Trials == nil {
		t.Fatalf("decision %+v", d)
	}
	if tr := d.Decided.Trials; tr.Reducer != "majority" || len(tr.Answers) != 3 {
		t.Errorf("trials %+v", tr)
	}
	if !d.Report.Summary.Pass || d.Report.Summary.Equivalents != 2 || d.Report.Summary.Blocked != 0 {
		t.Fatalf("summary %+v: want c1 and c2 equivalent by 2 of 3", d.Report.Summary)
	}
	// c2 split three ways: no majority, so it is blocked and nothing passes.
	votes[5] = vote("c2", VerdictRegressed, 2)
	votes[3] = vote("c2", VerdictDiverged, 1)
	votes[1] = vote("c2", VerdictEquivalent, 0)
	d = Derive(spec, votes)
	if d.Report.Summary.Pass || d.Report.Summary.Blocked != 1 {
		t.Fatalf("split case: summary %+v", d.Report.Summary)
	}
	found := false
	for _, c := range d.Report.Cases {
		found = found || c.CaseID == "c2" && strings.Contains(c.Error, "trials disagree")
	}
	if !found {
		t.Errorf("cases %+v: want c2 blocked because its trials disagree", d.Report.Cases)
	}
	if got := strings.Join(d.Decided.Trials.Answers, ","); got != "pass,pass,fail" || d.Decided.Trials.Answer != "fail" || d.Decided.Trials.For != 1 {
		t.Errorf("trial summaries %s, reduced %q", got, d.Decided.Trials.Answer)
	}
}
