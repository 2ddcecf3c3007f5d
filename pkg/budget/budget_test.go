package budget_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// judgeProcess is one judge instance: its own NATS connection and ledger, its own
// provider talking to the shared fake model server, priced and held to the budgets.
func judgeProcess(t *testing.T, s *natstest.Server, llm *fakellm.Server, table *price.Table, c budget.Config) judge.Provider {
	t.Helper()
	_, js := s.Connect(t)
	l, err := budget.Open(context.Background(), js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := openai.New(openai.Config{BaseURL: llm.BaseURL(), Model: "fake-model", MaxAttempts: 1, Concurrency: 16, ResponseFormat: "none"})
	if err != nil {
		t.Fatal(err)
	}
	return budget.Provider(judge.Priced(p, table), l, c)
}

func request() judge.Request {
	return judge.Request{Kind: "ab", Key: "AC-1", Model: "fake-model", Params: judge.Params{MaxTokens: 40},
		Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: "Compare slot A with slot B and answer."}}}}}
}

// TestConcurrentJudgesNeverOverspend runs two judge instances, eight callers each, on one
// batch budget that covers some of their 200 calls: every call past the budget is
// refused before it is sent, what the fake server received is what was settled, and
// what was spent stays within the budget.
func TestConcurrentJudgesNeverOverspend(t *testing.T) {
	s := natstest.Start(t)
	llm := fakellm.New(fakellm.Options{})
	t.Cleanup(llm.Close)
	table, err := (&price.Table{}).With([]string{"fake-model=1.00/0.50/2.00"})
	if err != nil {
		t.Fatal(err)
	}
	const limit = "0.003 USD" // 3,000,000 nano-dollars: about 50 of the calls
	procs := []judge.Provider{judgeProcess(t, s, llm, table, budget.Config{}), judgeProcess(t, s, llm, table, budget.Config{})}
	ctx, err := budget.WithBatch(judge.WithTenant(context.Background(), "team-a"), "team-a", "b-1", limit)
	if err != nil {
		t.Fatal(err)
	}
	var made, refused atomic.Int64
	var costMu sync.Mutex
	var spentByResponses price.Money
	var wg sync.WaitGroup
	for i := range 16 {
		p := procs[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 / 16 {
				resp, err := p.Complete(ctx, request())
				switch {
				case errors.Is(err, judge.ErrBudgetExhausted):
					refused.Add(1)
					if !strings.HasPrefix(err.Error(), "budget exhausted: the batch's budget is 0.003 USD") {
						t.Errorf("refusal %q: want the budget and its figures", err)
					}
				case err != nil:
					t.Error(err)
				default:
					made.Add(1)
					// Independently of the price code: the usage the server reported, at
					// 1000 and 2000 nano-dollars a token.
					costMu.Lock()
					spentByResponses += price.Money(resp.PromptTokens*1000 + resp.CompletionTokens*2000)
					costMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if refused.Load() == 0 || made.Load() == 0 {
		t.Fatalf("made %d, refused %d: want the budget to cover some calls and refuse the rest", made.Load(), refused.Load())
	}
	if got := int64(llm.Calls()); got != made.Load() {
		t.Errorf("the fake server received %d requests, the judges made %d: a refused call reached the provider", got, made.Load())
	}
	var want price.Money
	_, js := s.Connect(t)
	l, err := budget.Open(context.Background(), js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Status(context.Background(), budget.BatchKey("team-a", "b-1"))
	if err != nil {
		t.Fatal(err)
	}
	want = spentByResponses
	if st.Spent.Money != want || st.Calls != int(made.Load()) || st.Reserved != (budget.Amount{}) {
		t.Errorf("ledger %+v: want spent %d over %d calls, nothing left reserved", st, want, made.Load())
	}
	if lim, _ := price.ParseLimit(limit); st.Spent.Money > lim.Money {
		t.Errorf("spent %s of a %s budget", st.Spent.Money, lim.Money)
	}
	t.Logf("%d calls made (%s), %d refused", made.Load(), st.Spent.Money, refused.Load())
}

func TestTenantBudgetAndUnpriced(t *testing.T) {
	s := natstest.Start(t)
	llm := fakellm.New(fakellm.Options{})
	t.Cleanup(llm.Close)
	tb, err := budget.ParseTenantBudgets([]string{"*=100 tokens/day", "team-b=1 USD/month"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p := judgeProcess(t, s, llm, &price.Table{}, budget.Config{Tenants: tb, Now: func() time.Time { return now }})
	// team-a falls under "*": 100 tokens a day, less than one call's estimate.
	_, err = p.Complete(judge.WithTenant(context.Background(), "team-a"), request())
	if !errors.Is(err, judge.ErrBudgetExhausted) || !strings.Contains(err.Error(), "team team-a's budget for 2026-12-02 is 100 tokens") {
		t.Errorf("team-a: %v", err)
	}
	// team-b has money, but the model has no price: the budget cannot be kept.
	_, err = p.Complete(judge.WithTenant(context.Background(), "team-b"), request())
	if !errors.Is(err, judge.ErrBudgetExhausted) || !strings.Contains(err.Error(), "model fake-model has no price") {
		t.Errorf("team-b: %v", err)
	}
	// A call no budget covers goes through.
	if _, err := p.Complete(context.Background(), request()); err != nil {
		t.Error(err)
	}
	if llm.Calls() != 1 {
		t.Errorf("the server received %d requests, want 1", llm.Calls())
	}
	for _, bad := range []string{"team-a", "team-a=5 USD", "team-a=5 USD/year", "team-a=1 USD/day,team-a=2 USD/day"} {
		if _, err := budget.ParseTenantBudgets(strings.Split(bad, ",")); err == nil {
			t.Errorf("--tenant-budget %q: want an error", bad)
		}
	}
	if got := budget.Week.Start(now); got != "2026-W49" {
		t.Errorf("week = %s", got)
	}
}
