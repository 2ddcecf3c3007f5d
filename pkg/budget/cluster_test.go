package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// TestReserveOutlastsALeaderElection: the budget bucket's leader dies and the next
// reservation comes while the other two elect a new one. It must wait for the new leader
// rather than end the call (and its AC) as if the provider were down.
func TestReserveOutlastsALeaderElection(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := budget.Open(ctx, js, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	scopes := []budget.Scope{{Key: budget.BatchKey("team-a", "b-1"), Limit: price.Limit{Tokens: 1 << 30}, What: "the batch's budget"}}
	reserve := func() {
		t.Helper()
		h, err := l.Reserve(ctx, scopes, budget.Amount{Tokens: 10}, time.Hour)
		if err != nil {
			t.Fatalf("reserve: %v", err)
		}
		if err := l.Settle(ctx, h, budget.Amount{Tokens: 10}); err != nil {
			t.Fatalf("settle: %v", err)
		}
	}
	reserve()
	s, err := js.Stream(ctx, "KV_"+budget.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	leader := s.CachedInfo().Cluster.Leader
	for i, ns := range c.Servers {
		if ns.Name() == leader {
			c.Stop(i)
		}
	}
	for range 5 {
		reserve()
	}
	if st, err := l.Status(ctx, scopes[0].Key); err != nil || st.Spent.Tokens != 60 {
		t.Fatalf("after the election: %+v, %v; want 60 tokens spent, none twice", st, err)
	}
}
