package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

// TestTenantFairness: with per-tenant consumers and an in-flight quota, team B's 20-AC
// batch submitted after team A's 5,000-AC batch finishes in under 10% of team A's batch
// time. On one shared consumer B would wait behind all of A.
func TestTenantFairness(t *testing.T) {
	env := NewEnv(t)
	env.Bus.Tenants = []string{"team-a", "team-b"}
	judgeP := scriptedLatency(t, 10*time.Millisecond)
	r := env.StartWith(app.Options{Concurrency: 16, TenantQuota: 8, Provider: judgeP, Instance: "all", CloseTimeout: 10 * time.Second})

	big := WriteBatch(t, TextBatch(5000, ""))
	small := WriteBatch(t, TextBatch(20, ""))
	sub := &client.Submitter{Pub: r.Pub, Store: env.Store}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	startA := time.Now()
	a, err := sub.Submit(ctx, big, "team-a", client.NewBatchID(big))
	if err != nil {
		t.Fatal(err)
	}
	startB := time.Now()
	b, err := sub.Submit(ctx, small, "team-b", client.NewBatchID(small))
	if err != nil {
		t.Fatal(err)
	}
	doneB := make(chan time.Duration, 1)
	go func() {
		if _, err := client.Watch(ctx, r.Buckets, b.Tenant, b.BatchID, 10*time.Millisecond, func(client.Progress) {}); err == nil {
			doneB <- time.Since(startB)
		}
		close(doneB)
	}()
	if _, err := client.Watch(ctx, r.Buckets, a.Tenant, a.BatchID, 50*time.Millisecond, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	timeA := time.Since(startA)
	timeB, ok := <-doneB
	if !ok {
		t.Fatal("team B's batch did not complete")
	}
	t.Logf("team A: 5000 ACs in %s; team B: 20 ACs in %s (%.1f%%)", timeA.Round(time.Millisecond), timeB.Round(time.Millisecond), 100*timeB.Seconds()/timeA.Seconds())
	if timeB > timeA/10 {
		t.Fatalf("team B took %s, more than 10%% of team A's %s", timeB, timeA)
	}
	if _, err := client.Load(ctx, r.Buckets, env.Store, a.Tenant, a.BatchID); err != nil {
		t.Fatal(err)
	}
}
