package memlimit

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestForNeverBelowTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base, live, want int64
		headroom         int
	}{
		{640 * mib, 100 * mib, 640 * mib, Pipeline}, // room enough: the base
		{640 * mib, 320 * mib, 640 * mib, Pipeline},
		{640 * mib, 400 * mib, 800 * mib, Pipeline},   // near the base: headroom over the live heap
		{640 * mib, 1000 * mib, 2000 * mib, Pipeline}, // past it: the collector is never starved
		{384 * mib, 300 * mib, 384 * mib, Audit},      // the audit keeps its tight base
		{384 * mib, 400 * mib, 500 * mib, Audit},
	} {
		if got := For(c.base, c.live, c.headroom); got != c.want {
			t.Errorf("For(%d MiB, %d MiB) = %d MiB, want %d MiB", c.base/mib, c.live/mib, got/mib, c.want/mib)
		}
		if got := For(c.base, c.live, c.headroom); got < c.live+c.live*int64(c.headroom)/100 && got != c.base {
			t.Errorf("For(%d, %d, %d) leaves less than its headroom to collect into", c.base, c.live, c.headroom)
		}
	}
}

// TestFollowRaisesTheLimitOverALargeHeap holds a live heap of 64 MiB under a 16 MiB
// base: the limit in force must rise above the live heap, which the base alone (the
// all-in-one mode's fixed limit before) would leave the collector running back to back
// under.
func TestFollowRaisesTheLimitOverALargeHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		mu.Lock()
		if stop != nil {
			stop()
			stop = nil
		}
		mu.Unlock()
		debug.SetMemoryLimit(prev)
	})
	const base = 16 << 20
	held := make([][]byte, 64)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Follow(ctx, base, Audit)
	if got := Current(); got < base {
		t.Fatalf("limit %d after Follow, want at least the base %d", got, base)
	}
	deadline := time.Now().Add(30 * time.Second)
	for Current() <= 64<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("limit still %d MiB with 64 MiB live, want above it", Current()>>20)
		}
		runtime.GC()
		time.Sleep(Every)
	}
	runtime.KeepAlive(held)
}

func TestOperatorLimitStands(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	prev := debug.SetMemoryLimit(math.MaxInt64 - 1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	Follow(context.Background(), 16<<20, Pipeline)
	if got := Current(); got != math.MaxInt64-1 {
		t.Fatalf("limit %d with GOMEMLIMIT set, want it untouched", got)
	}
}
