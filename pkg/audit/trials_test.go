package audit_test

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// trialled is a one-job batch judged with five trials (A, A, B, A, B) and, when ladder
// is set, a ladder whose cheap rung answered unsure so the strong one decided.
func trialled(t *testing.T, ladder bool) *fixture {
	f := newFixture(t)
	spec := abSpec("AC-1")
	spec.Repeats = &events.Repeats{Trials: 5}
	var votes []events.Vote
	for i, raw := range []string{"A", "A", "B", "A", "B"} {
		votes = append(votes, events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "cheap"}, Order: "AB", Status: events.VoteOK,
			RawWinner: raw, Confidence: 0.9, BiggestGap: "the headings", Trial: i})
	}
	if ladder {
		spec.Repeats.Ladder = []string{"cheap", "strong"}
		spec.Repeats.Escalate = &events.Escalate{Disagreement: true}
		for i := range 5 {
			votes = append(votes, events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "strong"}, Order: "AB", Status: events.VoteOK,
				RawWinner: "B", Confidence: 0.95, BiggestGap: "the headings", Trial: i, Rung: 1})
		}
	}
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: 0, BatchSize: 1}, f.tenant, f.batch, "AC-1", 0, "", nil)
	f.in(sub)
	f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, "AC-1", 0, "", &sub.Envelope))
	return f
}

// TestAuditTrials: the trial reduction and the ladder's rung are re-derived from the
// answers on the verdict event; an edited trial answer is caught.
func TestAuditTrials(t *testing.T) {
	for _, ladder := range []bool{false, true} {
		f := trialled(t, ladder)
		if rep := f.audit(); !rep.OK() {
			t.Fatalf("ladder %v: honest trials: %s", ladder, dump(rep))
		}
		d := f.recs[f.find(events.TypeIterationDecided, "AC-1")].Event.Payload.(*events.IterationDecided)
		if d.Trials == nil || d.Trials.Agreement != map[bool]float64{false: 0.6, true: 1}[ladder] || (d.Ladder != nil) != ladder {
			t.Fatalf("ladder %v: decision %+v", ladder, d)
		}
		if ladder && (d.Ladder.Decided != 1 || d.Ladder.Why[0] != "trials disagreed (agreement 0.60)") {
			t.Fatalf("ladder %+v", d.Ladder)
		}

		// The third trial's B edited to A: the recorded decision no longer follows.
		f = trialled(t, ladder)
		f.rewrite(f.find(events.TypeVerdictEmitted, "AC-1"), func(ev *events.Event) {
			v := *ev.Payload.(*events.VerdictEmitted)
			v.Votes = append([]events.Vote(nil), v.Votes...)
			v.Votes[2].RawWinner = "A"
			ev.Payload = &v
		})
		rep := f.audit()
		if !has(rep, func(m audit.Mismatch) bool { return m.Job == "AC-1" && strings.Contains(m.String(), "trials") }) {
			t.Fatalf("ladder %v: an edited trial answer is not caught as the trials': %s", ladder, dump(rep))
		}
	}
}
