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
