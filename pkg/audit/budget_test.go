package audit_test

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

const budgetReason = "budget exhausted: the batch's budget is 0.01 USD; 0.0093 USD spent, 0 USD reserved by calls in flight, and the next call may cost up to 0.0021 USD"

// budgetStopped is a two-job batch whose second job's call a budget refused: the judge
// recorded the refusal on the verdict, and the rules blocked the job with it.
func budgetStopped(t *testing.T) *fixture {
	f := newFixture(t)
	f.abJob("AC-1", 0, 2, ab.Assign("AC-1", 0).Label(ab.WinnerReference), 0.9)
	spec := abSpec("AC-2")
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: 1, BatchSize: 2}, f.tenant, f.batch, "AC-2", 0, "", nil)
	f.in(sub)
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "openai", Model: "gpt-4o-mini", BudgetRefused: budgetReason}, Order: "AB",
		Status: events.VoteUnavailable, Error: budgetReason}}
	f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, "AC-2", 0, "", &sub.Envelope))
	return f
}

// TestAuditBudgetStop: a budget stop is re-derived from the recorded verdict (the rule is
// the rulebook's, not the aggregator's word), and a block that names another reason, or a
// refused call recorded as judged, is caught.
func TestAuditBudgetStop(t *testing.T) {
	f := budgetStopped(t)
	if rep := f.audit(); !rep.OK() {
		t.Fatalf("budget-stopped batch: %s", dump(rep))
	}
	blocked := f.recs[f.find(events.TypeJobBlocked, "AC-2")].Event.Payload.(*events.JobBlocked)
	if blocked.Reason != budgetReason || blocked.Stage != "judge" {
		t.Fatalf("AC-2 blocked at %s with %q: want the budget's refusal", blocked.Stage, blocked.Reason)
	}

	f = budgetStopped(t)
	f.rewrite(f.find(events.TypeJobBlocked, "AC-2"), func(ev *events.Event) {
		b := *ev.Payload.(*events.JobBlocked)
		b.Reason = "judge unavailable"
		ev.Payload = &b
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Job == "AC-2" && strings.Contains(m.String(), "budget exhausted")
	}) {
		t.Fatalf("a budget stop re-labelled: %s", dump(rep))
	}
}
