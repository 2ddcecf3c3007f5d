package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// TestBatchModeReleasesBudget: calls parked in a provider batch hold their team's budget
// reservations until the batch ends; a batch that ends expired releases every one of
// them (nothing spent), one that completes settles every one with what was used.
func TestBatchModeReleasesBudget(t *testing.T) {
	for _, expire := range []bool{true, false} {
		t.Run(fmt.Sprintf("expire=%v", expire), func(t *testing.T) {
			p, _ := OpenAIJudge(t, "fake-model", fakellm.Options{BatchLatency: 100 * time.Millisecond, BatchExpire: expire})
			tenants, err := budget.ParseTenantBudgets([]string{e2eTenant + "=10M tokens/day"})
			if err != nil {
				t.Fatal(err)
			}
			env := NewEnv(t)
			env.StartWith(app.Options{Services: bus.Services, Concurrency: 16, Provider: p, Instance: "judge-batch", CloseTimeout: 10 * time.Second,
				JudgeModes: batchModes("batch", 200*time.Millisecond, 64), TenantBudgets: tenants})
			res := env.Wait(env.Submit(WriteBatch(t, batchFiles{N: 5, Salt: fmt.Sprint("rel", expire)}.build()), e2eTenant), time.Minute)
			if expire && res.Summary.Blocked != 5 || !expire && res.Summary.Compared != 5 {
				t.Fatalf("summary %+v", res.Summary)
			}
			js, _ := jetstream.New(env.Conn())
			kvb, err := js.KeyValue(context.Background(), budget.DefaultBucket)
			if err != nil {
				t.Fatal(err)
			}
			st, err := budget.New(kvb).Status(context.Background(), budget.TenantKey(e2eTenant, budget.Day.Start(time.Now())))
			if err != nil {
				t.Fatal(err)
			}
			if st.Reserved != (budget.Amount{}) || st.Calls != 5 || expire != (st.Spent.Tokens == 0) {
				t.Errorf("the team's budget after the provider batch ended: %+v; want 5 calls settled, nothing reserved, spent only if completed", st)
			}
		})
	}
}
