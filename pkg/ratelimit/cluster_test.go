package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
)

// TestNewReplicatedConcurrently: judges starting together on a fresh three-node cluster
// each create the replicated bucket at once. The cluster answers only the first of
// identical creations in flight; the others must ask again instead of failing the
// judge's start at its deadline.
func TestNewReplicatedConcurrently(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		_, js := c.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, errs[i] = New(ctx, js, Limits{RequestsPerMinute: 60, Replicas: 3})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("limiter %d: %v", i, err)
		}
	}
}

// TestWaitOutlastsALeaderElection: the bucket's leader dies and the next call comes
// while the other two elect a new one. The CI run of stop 32 saw the renderer's limiter
// fail there ("no responders") and an equivalence AC end blocked as if the provider were
// down; the call must wait for the new leader instead.
func TestWaitOutlastsALeaderElection(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := New(ctx, js, Limits{RequestsPerMinute: 6000, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx, TenantKey("a"), 1, 0); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_"+DefaultBucket)
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
		if err := l.Wait(ctx, TenantKey("a"), 1, 0); err != nil {
			t.Fatalf("a call during the election of %s's successor: %v", leader, err)
		}
	}
}
