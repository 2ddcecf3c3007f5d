package audit_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// maxRetainedPerJob is what the audit may keep of each job it audited, for the key-value
// comparison that follows it (docs/architecture.md, the audit): never the events' bytes
// nor the records themselves. About 450 bytes are kept, over batches of 2,000 and 8,000
// jobs, whose steps all fit the step tables' hot part (stepset.HotSlots): the step
// entries about 260 (about 6 a job, 32 bytes each in a table at most 3/4 full, growing by
// doubling), the digests the chains name about 80 (auditor.linked: a step table of 32
// bytes a value, in memory while it fits; two tables of 16 bytes took about 130, a map
// about 110, but it grew with the jobs in flight of a large batch), and rulebook.Memory's and the submissions' words:
// its key index's entry (a step table's too, about 60 bytes while it fits in memory),
// where its record is, its index and place in the batch's order and the seq of its
// submission (a word each, in memory while they fit their pages' budget). With the step
// entries in a map and Memory indexing its spilled records by key string 690 were kept
// (Memory's share about 190), with the records held compressed in memory about 1,010
// (1,080 over batches of 500 and 2,000), and with the cancels' scan of the first read
// kept alive by a pointer into it 310 more (1,392): this bound fails each, and the
// digests in two tables (502).
const maxRetainedPerJob = 490

// maxRetainedPerJobStepsOut is maxRetainedPerJob with the step entries and the jobs' keys
// written out past a small hot table (audit.SpillSteps), as a batch of more than about
// 100,000 jobs has them, and the digests' table too: about 31 bytes, the tables' bloom
// filters and fences most of them, the words of the jobs' places as above (35 with every
// run's filter at 1 %, 53 with the digests in two tables of two words too, 68 with the
// key index in memory too, 181 with the digests in a map).
const maxRetainedPerJobStepsOut = 40

// retained audits an honest batch of n ab jobs and returns the heap the audit still
// holds at its end, and the stream's bytes per job.
func retained(t *testing.T, n int) (heap, stream float64) {
	t.Helper()
	f := newFixture(t)
	for i := range n {
		id := fmt.Sprintf("AC-%d", i)
		f.abJob(id, i, n, ab.Assign(id, 0).Label(ab.WinnerReference), 0.9)
	}
	bytes := 0
	for _, r := range f.recs {
		bytes += len(r.Raw)
	}
	// Twice: pooled buffers survive one collection.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := f.audit()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if !rep.OK() || rep.Jobs != n {
		t.Fatalf("%d jobs: want a clean audit of every job, got %d jobs: %s", n, rep.Jobs, dump(rep))
	}
	runtime.KeepAlive(rep)
	runtime.KeepAlive(f)
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc)), float64(bytes) / float64(n)
}

// TestAuditMemoryPerJob holds what the audit keeps of each job to a small constant: the
// heap it holds at its end, at 2,000 and 8,000 jobs, grows by at most maxRetainedPerJob a job,
// maxRetainedPerJobStepsOut with the step entries written out (the state comparison
// needs each job's re-derived record and the steps' entries). A
// stream held whole fails it (a real job's events are about 9 KB), as does a structure
// kept per event that outgrows them.
func TestAuditMemoryPerJob(t *testing.T) {
	if testing.Short() {
		t.Skip("audits 20,000 jobs")
	}
	const small, large = 2000, 8000
	for _, c := range []struct {
		what  string
		slots int
		bound float64
	}{
		{"the steps in memory", 0, maxRetainedPerJob},
		{"the steps written out", 1 << 10, maxRetainedPerJobStepsOut},
	} {
		if c.slots > 0 {
			restore := audit.SpillSteps(c.slots)
			defer restore()
		}
		hs, _ := retained(t, small)
		hl, stream := retained(t, large)
		perJob := (hl - hs) / (large - small)
		t.Logf("%s: retained %.1f MB at %d jobs, %.1f MB at %d: %.0f bytes a job (the stream: %.0f bytes a job)", c.what, hs/1e6, small, hl/1e6, large, perJob, stream)
		if perJob > c.bound {
			t.Errorf("%s: the audit keeps %.0f bytes more a job, over %.0f", c.what, perJob, c.bound)
		}
	}
}

// TestStateCheckFindsTheRecordsMissing: the key-value comparison, which marks the jobs
// whose record it met as bits over the replay's places rather than by id, still names
// each job without a record (the first 20, then how many more), and a record under the
// batch's keys that names another batch counts for the job of its id here while it is
// reported as the record of a job the replay never submits.
func TestStateCheckFindsTheRecordsMissing(t *testing.T) {
	const n = 30
	f := newFixture(t)
	for i := range n {
		id := fmt.Sprintf("AC-%d", i)
		f.abJob(id, i, n, ab.Assign(id, 0).Label(ab.WinnerReference), 0.9)
	}
	rep := f.audit()
	jobs := f.agg.Jobs(f.tenant, f.batch)
	clean := rep
	clean.Mismatches = nil
	audit.CheckState(&clean, f.agg.Header(f.tenant, f.batch), jobs)
	base := len(clean.Mismatches) // the header's completion, which the fixture does not write
	moved := jobs[1].Clone()
	moved.Batch = "other"
	kept := []*records.Job{jobs[0], moved, jobs[2]}
	audit.CheckState(&rep, f.agg.Header(f.tenant, f.batch), kept)
	var missing []string
	more, never := "", 0
	for _, m := range rep.Mismatches {
		switch {
		case m.Field == "record" && m.Job != "":
			missing = append(missing, m.Job)
		case m.Field == "record":
			more = m.Detail
		case m.Field == "job.submitted" && m.Job == "AC-1" && m.Batch == "other":
			never++
		}
	}
	want := []string{}
	for i := 3; i < 3+20; i++ {
		want = append(want, fmt.Sprintf("AC-%d", i))
	}
	if !slices.Equal(missing, want) || more != "and 7 more jobs without a record" || never != 1 ||
		len(rep.Mismatches) != base+len(want)+2 {
		t.Fatalf("missing %v (want %v), then %q, %d records of a job never submitted; %d findings, %d beside the state check's own:%s",
			missing, want, more, never, len(rep.Mismatches), base, dump(rep))
	}
}
