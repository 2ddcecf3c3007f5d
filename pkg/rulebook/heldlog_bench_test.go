package rulebook

import (
	"fmt"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// BenchmarkMemoryInFlight replays a stream of 20,000 jobs each touched six times (its
// submission, four steps in flight, its outcome), a touch being what the runner does:
// the record loaded, changed, stored. A job's touches are lag jobs apart in the stream,
// so 5 x lag jobs are in flight at once: 1,000 fit the 1 MiB log given here, 10,000 do
// not, and most touches then read the record back from the spill file. "held" keeps
// every record in memory (no SpillDir), as the audit did before.
func BenchmarkMemoryInFlight(b *testing.B) {
	const jobs, touches = 20_000, 6
	for _, c := range []struct {
		what string
		lag  int
		dir  bool
	}{
		{"held/window1000", 200, false},
		{"log/window1000", 200, true},
		{"held/window10000", 2000, false},
		{"log/window10000", 2000, true},
	} {
		b.Run(c.what, func(b *testing.B) {
			var fileBytes, evicted float64
			for b.Loop() {
				m := &Memory{budget: 1 << 20}
				if c.dir {
					m.SpillDir = b.TempDir()
				}
				m.init()
				touch := func(i, step int) {
					id := fmt.Sprintf("AC-%d", i)
					key := records.JobKey("team-a", "b-1", id)
					j := m.decode(key)
					if j == nil {
						j = &records.Job{Tenant: "team-a", Batch: "b-1", ACID: id, Index: i, BatchSize: jobs, Status: events.StatusPending,
							Spec:          events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "the answer names the source it rests on and quotes it"},
							CorrelationID: fmt.Sprintf("corr-%08d", i)}
					}
					j.Calls = append(j.Calls, records.Call{Judge: "scripted/m", Label: fmt.Sprintf("step-%d", step), Status: events.VoteOK,
						PromptTokens: 1200 + i%97, CompletionTokens: 80 + i%13, LatencyMillis: int64(400 + i%211),
						Record: &events.Blob{SHA256: fmt.Sprintf("%064x", i*touches+step), MediaType: "application/json", Size: int64(2000 + i%500)}})
					if step == touches-1 {
						j.Status = events.StatusCompared
					}
					m.store(j)
				}
				for k := 0; k < jobs+(touches-1)*c.lag; k++ {
					for step := touches - 1; step >= 0; step-- {
						if i := k - step*c.lag; i >= 0 && i < jobs {
							touch(i, step)
						}
					}
				}
				if m.spill != nil {
					fileBytes += float64(m.spill.end)
				}
				evicted += float64(m.evicted)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(jobs*touches), "ns/touch")
			b.ReportMetric(fileBytes/float64(b.N)/jobs, "file-B/job")
			b.ReportMetric(evicted/float64(b.N)/jobs, "written-out/job")
		})
	}
}
