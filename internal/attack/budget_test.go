package attack

import (
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// TestTeamBudgetOnSharedDeployment: a shared deployment (every service on its own NATS
// user, the teams through the ingress) with --tenant-budget team-a=<tiny>/day and no
// budget for team-b. team-a's ACs past its budget end blocked "budget exhausted" with the
// figures; the fake provider is asked only for the ACs that were judged, and what they
// cost stays within the budget; team-b's batch is judged in full; the audit is clean for
// both.
func TestTeamBudgetOnSharedDeployment(t *testing.T) {
	const acs = 8
	// The limit fits a little more than one call's reservation (about 0.014 USD at
	// these prices for this batch's prompts and the answer limit) and a few calls'
	// costs, so a few calls are made and the rest refused, however they interleave.
	const limit = "0.02 USD"
	var fake *fakellm.Server
	w := newWorld(t, worldOptions{
		service: func(svc string, o *app.Options) {
			if svc != bus.Judge {
				return
			}
			p, f := e2e.OpenAIJudge(t, "fake-model", fakellm.Options{})
			o.Provider, fake = p, f
			prices, err := price.Default().With([]string{p.DefaultModel() + "=1/0.5/2"})
			if err != nil {
				t.Fatal(err)
			}
			o.Prices = prices
			if o.TenantBudgets, err = budget.ParseTenantBudgets([]string{"team-a=" + limit + "/day"}); err != nil {
				t.Fatal(err)
			}
		},
	})
	a := w.team("team-a")
	subA := w.submit(a, textBatch(acs, "spender"))
	bc, victim := w.victim(acs)

	resA := w.wait(a, subA)
	judged, blocked := 0, 0
	for _, r := range resA.Rows {
		switch r.Status {
		case string(events.StatusCompared):
			judged++
		case string(events.StatusBlocked):
			blocked++
			if !strings.HasPrefix(r.Reason, "budget exhausted: team team-a's budget for ") ||
				!strings.Contains(r.Reason, " is "+limit+"; ") || !strings.Contains(r.Reason, " spent, ") ||
				!strings.Contains(r.Reason, "the next call may cost up to ") {
				t.Errorf("team-a's %s blocked with %q; want the budget exhausted with its figures", r.ACID, r.Reason)
			}
		default:
			t.Errorf("team-a's %s: %+v", r.ACID, r)
		}
	}
	if judged == 0 || blocked == 0 || judged+blocked != acs {
		t.Fatalf("team-a: %d judged, %d blocked of %d; want some of each (%s)", judged, blocked, acs, resA.Rows[0].Reason)
	}
	res := w.victimIntact(bc, victim)

	// The provider saw one request per judged AC of team-a's and none for the blocked.
	asked := 0
	for _, req := range fake.Requests() {
		if strings.Contains(userText(req), "spender") {
			asked++
		}
	}
	if asked != judged {
		t.Errorf("the provider got %d requests of team-a's; want %d, one per judged AC", asked, judged)
	}
	if n := fake.Calls(); n != judged+res.Summary.Compared {
		t.Errorf("the provider got %d requests; want %d (team-a's judged) + %d (team-b's)", n, judged, res.Summary.Compared)
	}
	lim, err := price.ParseLimit(limit)
	if err != nil {
		t.Fatal(err)
	}
	if resA.Cost.Total.Cost <= 0 || resA.Cost.Total.Cost > lim.Money || resA.Cost.Total.Priced != judged {
		t.Errorf("team-a's batch cost %+v; want %d priced calls within %s", resA.Cost.Total, judged, limit)
	}
	if resA.Cost.BudgetRefused != blocked {
		t.Errorf("team-a's budget-refused calls: %d, want %d", resA.Cost.BudgetRefused, blocked)
	}
	// The ledger holds what was spent and nothing reserved: every call was settled.
	kvb, err := w.opJS.KeyValue(ctxT(t), budget.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := budget.New(kvb).Status(ctxT(t), budget.TenantKey("team-a", budget.Day.Start(time.Now())))
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent.Money != resA.Cost.Total.Cost || st.Reserved != (budget.Amount{}) || st.Calls != judged || st.Refused < blocked {
		t.Errorf("team-a's budget %+v; want %s spent by %d calls, nothing reserved, %d refused", st, resA.Cost.Total.Cost, judged, blocked)
	}
	t.Logf("team-a: %d judged for %s, %d blocked", judged, resA.Cost.Total.Cost, blocked)
	w.auditClean(subA.Tenant, subA.BatchID)
}

// userText is a chat request's text, all its messages'.
func userText(req goopenai.ChatCompletionRequest) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(fakellm.Text(m))
	}
	return b.String()
}
