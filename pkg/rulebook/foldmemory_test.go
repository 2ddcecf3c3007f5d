package rulebook_test

import (
	"io"
	"runtime"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// maxFoldPerJob bounds the heap a fold keeps a job (without an index, as the audit
// folds). The fold held 643 bytes a job of foldJobs' before its rows were written out
// (the ab comparisons decoded, the list rows, the packed links, an outcome).
const maxFoldPerJob = 64

// maxIndexedPerJob bounds it with the index (the aggregator's fold): the index's table of
// strings is held (here three a job: the AC id, the gap and the rationale are unique),
// its entries are written out. 190 measured; 895 before.
const maxIndexedPerJob = 256

// foldHeap folds n of foldJobs' jobs, built one at a time in batch order (so nothing but
// the fold keeps them), and returns the live heap once each of at is added.
func foldHeap(t *testing.T, n int, keepIndex bool, at ...int) []float64 {
	t.Helper()
	heap := func() float64 {
		// Twice: what a cleanup let go in the first is collected in the second.
		runtime.GC()
		return float64(liveHeap())
	}
	var out []float64
	f := rulebook.NewFold(tenant, batch)
	if keepIndex {
		f.KeepIndex()
	}
	for i := 0; i < n; i++ {
		f.Add(foldJob(t, i, n))
		if len(at) > 0 && i+1 == at[0] {
			out = append(out, heap())
			at = at[1:]
		}
	}
	// The fold still completes: the bound holds a fold that works.
	c, err := f.CompleteHashed("AC-0", 0, func(events.Kind) io.Writer { return nil })
	if err != nil || c.Summary.Total != n {
		t.Fatalf("completion of %d jobs: %+v, %v", n, c.Summary, err)
	}
	return out
}

// TestFoldMemoryPerJob: what a completion's fold holds grows with the jobs in flight
// (its buffers, here 64 KiB a sorter), not the batch: after 8,000 jobs it holds under
// maxFoldPerJob bytes a job more than after 2,000 (the outcome, links and manifest row
// of each are written out as they are added).
func TestFoldMemoryPerJob(t *testing.T) {
	defer func(b int) { spillsort.DefaultBuffer = b }(spillsort.DefaultBuffer)
	spillsort.DefaultBuffer = 64 << 10
	const small, large = 2000, 8000
	for _, keep := range []bool{false, true} {
		h := foldHeap(t, large, keep, small, large)
		perJob := (h[1] - h[0]) / (large - small)
		t.Logf("index %v: live heap %.2f MB after %d jobs, %.2f MB after %d: %.0f bytes a job", keep, h[0]/1e6, small, h[1]/1e6, large, perJob)
		if max := map[bool]float64{false: maxFoldPerJob, true: maxIndexedPerJob}[keep]; perJob > max {
			t.Errorf("the fold (index %v) keeps %.0f bytes more a job, over %.0f", keep, perJob, max)
		}
	}
}

// BenchmarkFold folds and completes 10,000 jobs (ab and critic) as the audit does, its
// rows spilled at the default buffer and at 64 KiB.
func BenchmarkFold(b *testing.B) {
	jobs := foldJobs(b, 10000)
	for _, buffer := range []int{spillsort.DefaultBuffer, 64 << 10} {
		b.Run(map[bool]string{true: "default", false: "64KiB"}[buffer == spillsort.DefaultBuffer], func(b *testing.B) {
			defer func(x int) { spillsort.DefaultBuffer = x }(spillsort.DefaultBuffer)
			spillsort.DefaultBuffer = buffer
			b.ReportAllocs()
			for b.Loop() {
				f := rulebook.NewFold(tenant, batch)
				for _, j := range jobs {
					f.Add(j)
				}
				if _, err := f.CompleteHashed("AC-0", 0, func(events.Kind) io.Writer { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(jobs)), "ns/job")
		})
	}
}
