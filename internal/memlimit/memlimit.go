// Package memlimit keeps a process's soft memory limit (debug.SetMemoryLimit) where it
// helps and never where it hurts.
//
// A soft limit below what a process needs is the worst setting there is: once the live
// heap reaches it, the collector runs back to back, its CPU limiter lets it take half of
// the cores, and allocations assist it with the rest. tribunal's all-in-one mode sets a
// limit so that a batch's garbage is collected before the heap doubles (its peak RSS
// then follows the live heap, not the collector's pacing), but a batch larger than the
// limit was sized for then spends most of its time collecting: a 1,000,000-AC batch ran
// at a sixteenth of the 100,000-AC pace with 65 % of its CPU marking (docs/benchmarks.md).
//
// Follow sets the limit and then raises it with the live heap, so that the collector
// always has some headroom over what is live to collect into: the limit still saves the
// heap's doubling, and never starves it.
package memlimit

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Headroom is the share of the live heap a limit leaves above it, in percent.
//
// Pipeline is the all-in-one mode's: as much as GOGC=100 gives, so that a collection
// runs once per live heap allocated. Each one marks the whole live heap, so less
// headroom costs in proportion: at 50 %, a 300,000-AC bench spent 36 % of its CPU
// collecting and took 1.4 times as long an AC (docs/benchmarks.md).
//
// Audit is the audit's, whose bound is its memory (under 500 MiB at 100,000 ACs) and
// whose live heap depends on what is in flight, not on the batch: it keeps the tight
// base for as long as the live heap allows, and only never lets the collector run back
// to back. At Pipeline's headroom the 100,000-AC audit peaked at 735 MiB.
const (
	Pipeline = 100
	Audit    = 25
)

// For is the limit for a live heap of live bytes, a base limit and a headroom in
// percent: base, or live and its headroom where that is more.
func For(base, live int64, headroom int) int64 {
	return max(base, live+live*int64(headroom)/100)
}

// Every is how often Follow reads the live heap. A collection's pace changes over
// seconds; a read costs microseconds.
const Every = 500 * time.Millisecond

// Set applies base as the soft limit unless the environment's GOMEMLIMIT already set
// one (the operator's word stands) or base is not positive. It reports whether it did.
func Set(base int64) bool {
	if os.Getenv("GOMEMLIMIT") != "" || base <= 0 {
		return false
	}
	debug.SetMemoryLimit(base)
	return true
}

var (
	mu   sync.Mutex
	stop context.CancelFunc // the running follower's
)

// Follow applies base as Set does and, where it did, keeps the limit at
// For(base, live, headroom) until ctx ends or Follow is called again (the newest base wins: the all-in-one mode
// sizes it for its batch once the batch is read).
func Follow(ctx context.Context, base int64, headroom int) {
	if !Set(base) {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if stop != nil {
		stop()
	}
	ctx, cancel := context.WithCancel(ctx)
	stop = cancel
	go run(ctx, base, headroom)
}

func run(ctx context.Context, base int64, headroom int) {
	t := time.NewTicker(Every)
	defer t.Stop()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	cur, raised := base, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // a runtime without the metric: the base stays
		}
		want := For(base, int64(sample[0].Value.Uint64()), headroom)
		if want == cur {
			continue
		}
		debug.SetMemoryLimit(want)
		if !raised && want > base {
			raised = true
			slog.Debug("soft memory limit raised with the live heap", "base_mib", base>>20, "limit_mib", want>>20)
		}
		cur = want
	}
}

// Current is the soft limit in force (math.MaxInt64 when none is).
func Current() int64 {
	return debug.SetMemoryLimit(-1)
}
