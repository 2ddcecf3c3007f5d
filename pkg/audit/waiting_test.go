package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// lagging is a batch of n ab jobs whose decisions all trail their verdicts: every job
// is submitted, its render requested and its verdict recorded, and only then are the
// aggregator's decisions (and the batch's completion) recorded, shuffled, as a judge
// running a whole batch ahead of the aggregator leaves them. Job 1's decision is not
// recorded, job 2's twice, and job 3's before its verdict. It returns the sequence of
// the first late decision, where the most expectations wait.
func lagging(t *testing.T, n int) (*fixture, uint64) {
	t.Helper()
	f := newFixture(t)
	var held []events.Event
	var early events.Event
	var complete *rulebook.Completion
	for i := range n {
		id := fmt.Sprintf("AC-%d", i)
		sub := events.New(&events.JobSubmitted{Spec: abSpec(id), Index: i, BatchSize: n}, f.tenant, f.batch, id, 0, "", nil)
		f.in(sub)
		votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok",
			RawWinner: ab.Assign(id, 0).Label(ab.WinnerReference), Confidence: 0.9, BiggestGap: "the headings"}}
		v := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", &sub.Envelope)
		data, err := events.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(len(f.recs) + 1)
		if i == 3 {
			seq++ // after its decision
		}
		sum := sha256.Sum256(data)
		res, err := f.agg.Apply(rulebook.Input{Event: v, Link: v.ID + ":" + hex.EncodeToString(sum[:]), Subject: mustSubject(t, v), Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			early = res.Publish[0]
			f.publish(early)
		}
		if vr := f.publish(v); vr.Seq != seq {
			t.Fatal("the verdict is not where it was applied")
		}
		for _, e := range res.Publish {
			switch {
			case i == 1, i == 3 && e.ID == early.ID:
			case i == 2:
				held = append(held, e, e)
			default:
				held = append(held, e)
			}
		}
		if res.Complete != nil {
			complete = res.Complete
		}
	}
	first := uint64(len(f.recs) + 1)
	rng := rand.New(rand.NewPCG(30, 3))
	rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	for _, e := range held {
		f.publish(e)
	}
	if complete != nil {
		f.announce(complete.Fold(), complete.By.ACID, complete.Attempt)
	}
	return f, first
}

func mustSubject(t *testing.T, ev events.Event) string {
	s, err := events.Subject(ev.Tenant, ev.Type)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// peakHeap audits f and returns the heap in use (over what it was before) when seq is
// visited, how many expectations waited then, and the report.
func peakHeap(f *fixture, seq uint64) (float64, int, audit.Report) {
	var before, at runtime.MemStats
	waiting := 0
	restore := audit.BeforeVisit(func(s uint64, w int) {
		if s == seq {
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&at)
			waiting = w
		}
	})
	defer restore()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := f.audit()
	runtime.KeepAlive(f) // the fixture's own rules' memory, in before
	return float64(int64(at.HeapAlloc) - int64(before.HeapAlloc)), waiting, rep
}

// maxPeakPerJob is what the audit may hold at its peak of each job whose decision waits
// for its record, the expectations waiting written out past a budget (auditor.waiting):
// about 112 bytes, the steps' entries and the digests the chains name (written out too:
// audit.SpillSteps) and bloom filters, the final records' index (rulebook.Memory) and the
// waiting expectations' index runs (about 2). With the expectations in a map by id, each
// compressed, about 540 were held (the map's entry, the id, the origin's id, the
// compressed event): this bound fails it.
const maxPeakPerJob = 250

// TestAuditManyOutputsOutstanding: with the decisions of a whole batch recorded after all
// of its verdicts, out of order, the heap the audit holds when the most wait grows with
// the jobs by no more than maxPeakPerJob, and its findings (a decision missing, one
// recorded twice, one before its verdict) are the audit's with everything in memory.
func TestAuditManyOutputsOutstanding(t *testing.T) {
	if testing.Short() {
		t.Skip("audits 60,000 jobs")
	}
	const small, large = 10000, 50000
	f, _ := lagging(t, 500)
	inMemoryFindings := f.audit().Mismatches
	inMemory := findingKeys(audit.Report{Mismatches: inMemoryFindings})
	defer audit.SpillSteps(1 << 10)()
	defer audit.SpillWaiting(64<<10, 1<<10)()
	rep := f.audit()
	if got := findingKeys(rep); got != inMemory {
		t.Fatalf("written out, the findings are\n%s\nin memory\n%s", got, inMemory)
	}
	for _, want := range []struct {
		kind  audit.MismatchKind
		job   string
		field string
	}{{audit.KindMissing, "AC-1", string(events.TypeIterationDecided)}, {audit.KindDuplicate, "AC-2", ""}, {audit.KindOrder, "AC-3", ""}} {
		requireFinding(t, rep, want.kind, want.job, want.field)
	}

	var heap [2]float64
	for i, n := range []int{small, large} {
		f, first := lagging(t, n)
		h, waiting, rep := peakHeap(f, first)
		if waiting < n-3 {
			t.Fatalf("%d jobs: %d expectations waited at seq %d, want one a job", n, waiting, first)
		}
		if rep.Jobs != n || len(rep.Mismatches) != len(inMemoryFindings) {
			t.Fatalf("%d jobs: %d audited, findings %s", n, rep.Jobs, dump(rep))
		}
		heap[i] = h
		t.Logf("%d jobs: %.1f MB in use with %d decisions waiting", n, h/1e6, waiting)
	}
	perJob := (heap[1] - heap[0]) / (large - small)
	t.Logf("%.0f bytes a job at the peak", perJob)
	if perJob > maxPeakPerJob {
		t.Errorf("the audit holds %.0f bytes more a job waiting, over %d", perJob, maxPeakPerJob)
	}
}

// TestAuditUnexplainedWrittenOut: a stream with thousands of decisions no input derives
// (a forger's) keeps them waiting to the end of the audit (auditor.early): written out
// past a small budget, they are reported as they are with all in memory, in stream
// order.
func TestAuditUnexplainedWrittenOut(t *testing.T) {
	const forged = 3000
	f := honest(t)
	d := f.recs[f.find(events.TypeIterationDecided, "AC-1")].Event
	for i := range forged {
		job := fmt.Sprintf("FORGED-%d", i)
		f.publish(events.New(d.Payload, f.tenant, f.batch, job, 0, "final", &d.Envelope))
	}
	inMemory := f.audit()
	defer audit.SpillWaiting(16<<10, 1<<10)()
	written := f.audit()
	if got, want := findingKeys(written), findingKeys(inMemory); got != want {
		t.Fatalf("written out, the findings are\n%s\nin memory\n%s", got, want)
	}
	n, last := 0, uint64(0)
	for _, m := range written.Mismatches {
		if m.Kind == audit.KindUnexplained && m.Seq > last {
			n, last = n+1, m.Seq
		}
	}
	if n != forged {
		t.Fatalf("%d forged decisions reported unexplained in stream order, want %d: %s", n, forged, dump(written))
	}
}
