package rulebook_test

import (
	"testing"
	"time"

	critickind "github.com/tribunal-dev/tribunal/pkg/kind/critic"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// TestBudgetStopForEveryKind: a verdict with a call a budget refused blocks its job with
// the refusal, at the judge stage, whatever the kind made of it: an ab panel whose first
// model answered, and a critic whose only call was refused. The answered call's cost is
// kept on the record; the refused one costs nothing.
func TestBudgetStopForEveryKind(t *testing.T) {
	const reason = "budget exhausted: the batch's budget is 0.01 USD; 0.0095 USD spent, 0 USD reserved by calls in flight, and the next call may cost up to 0.0021 USD"
	refused := events.JudgeInfo{Provider: "openai", Model: "gpt-4o", BudgetRefused: reason}
	answered := events.JudgeInfo{Provider: "openai", Model: "gpt-4o-mini", Priced: true, CostNanos: 1234, PromptTokens: 10, CompletionTokens: 2}
	critic := events.JobSpec{Kind: events.KindCritic, ACID: "AC-2", KindPart: &critickind.Spec{Task: "t", Output: events.Source{Name: "o", URL: "https://x/o"}}}
	for _, c := range []struct {
		name    string
		spec    events.JobSpec
		verdict events.Payload
		cost    int64
	}{
		{"ab panel", abSpec("AC-1"), &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{
			{Judge: answered, Order: "AB", Status: events.VoteOK, RawWinner: "A", Confidence: 0.9},
			{Judge: refused, Order: "AB", Status: events.VoteUnavailable, Error: reason}}}, 1234},
		{"critic", critic, &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critickind.Vote{Judge: refused, Status: events.VoteUnavailable, Error: reason}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := pending(t, c.spec)
			e := events.New(c.verdict, tenant, batch, c.spec.ACID, 0, "", nil)
			e.Time = t0.Add(time.Second)
			res, err := rulebook.Apply(rulebook.State{Job: j, Now: t0}, in(e))
			if err != nil || res.Job == nil {
				t.Fatalf("%+v, %v", res, err)
			}
			got := res.Job
			if got.Status != events.StatusBlocked || got.BlockStage != "judge" || got.BlockReason != reason {
				t.Errorf("job %s at %s with %q: want blocked at the judge with the refusal", got.Status, got.BlockStage, got.BlockReason)
			}
			if rulebook.Outcome(got) != kind.OutcomeBlocked {
				t.Errorf("outcome %s, want blocked", rulebook.Outcome(got))
			}
			if cost := got.Cost(); int64(cost.Cost) != c.cost {
				t.Errorf("cost %+v, want the answered calls' %d", cost, c.cost)
			}
			blocked := false
			for _, p := range res.Publish {
				if b, ok := p.Payload.(*events.JobBlocked); ok && b.Reason == reason {
					blocked = true
				}
			}
			if !blocked {
				t.Errorf("published %v: want job.blocked with the refusal", res.Publish)
			}
		})
	}
}
