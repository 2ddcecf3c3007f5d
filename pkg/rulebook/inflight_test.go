package rulebook_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// maxInFlightPerJob bounds what a Memory with a spill file holds a job in flight, its
// record included, once its tables in memory are at their bounds: its key's bloom bits
// and page fence in the index's runs (about 1.5 bytes), a bit for its final index, and
// the page pointers of its words: 8 measured (c3815e0 and before: 40, the index and
// the words all in memory). With every record in flight held in memory (f8f69f1: a map
// entry, its key, its bytes, not compressed yet here, as no job is final to give the
// codec its dictionary) 709.
const maxInFlightPerJob = 16

// TestMemoryInFlightHeldToBudget: with every job of a 50,000-job batch submitted before
// any is decided (a submitter far ahead of its judges), the live heap of a Memory with a
// spill file grows by its words a job between 10,000 and 50,000 jobs in flight, not by
// their records: those past the log's budget are in the file, and its segments never
// take more than the budget. Every job is then decided, its record read back from the
// file, and the batch completes with all of them, the log then holding nothing.
func TestMemoryInFlightHeldToBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("submits 50,000 jobs")
	}
	const small, large = 10_000, 50_000
	const budget = 1 << 20
	m := &rulebook.Memory{SpillDir: t.TempDir()}
	rulebook.SetHeldBudget(m, budget)
	// The key index's table and the places' words in memory at their bounds from the
	// start (their defaults, 4 MiB each, are reached past 50,000 jobs).
	rulebook.SetIndexBudgets(m, 1<<12, 64<<10)
	apply := func(e events.Event) *rulebook.Completion {
		t.Helper()
		res, err := m.Apply(in(e))
		if err != nil {
			t.Fatal(err)
		}
		return res.Complete
	}
	var heap []float64
	for i := range large {
		apply(submit(abSpec(fmt.Sprintf("AC-%d", i)), i, large))
		if i+1 == small || i+1 == large {
			heap = append(heap, float64(liveHeap()))
		}
	}
	perJob := (heap[1] - heap[0]) / (large - small)
	used, capacity := rulebook.HeldLog(m)
	t.Logf("live heap %.1f MB at %d jobs in flight, %.1f MB at %d: %.0f bytes a job; the log holds %d bytes of %d, %d records written out",
		heap[0]/1e6, small, heap[1]/1e6, large, perJob, used, capacity, rulebook.Evicted(m))
	if perJob > maxInFlightPerJob {
		t.Errorf("a Memory holds %.0f bytes more a job in flight, over %d", perJob, maxInFlightPerJob)
	}
	if capacity > budget || rulebook.Evicted(m) == 0 {
		t.Errorf("the log took %d bytes of a %d budget and wrote out %d records", capacity, budget, rulebook.Evicted(m))
	}
	var done *rulebook.Completion
	for i := range large {
		if c := apply(abVerdict(fmt.Sprintf("AC-%d", i), []string{"A", "B", "tie"}[i%3], 0.9, 0)); c != nil {
			done = c
		}
	}
	if done == nil {
		t.Fatalf("%d jobs decided, no completion", large)
	}
	c, err := done.Fold().CompleteHashed(done.By.ACID, 0, func(events.Kind) io.Writer { return nil })
	if err != nil || c.Summary.Total != large {
		t.Fatalf("completion of %d jobs: %+v, %v", large, c.Summary, err)
	}
	if got := rulebook.Spilled(m); got != large {
		t.Errorf("%d final records spilled, want %d", got, large)
	}
	used, capacity = rulebook.HeldLog(m)
	t.Logf("decided: the spill file %.0f bytes a job, the log holds %d bytes of %d", float64(rulebook.SpillBytes(m))/large, used, capacity)
	if capacity > 64<<10 {
		t.Errorf("the log holds %d bytes with every job final", capacity)
	}
}
