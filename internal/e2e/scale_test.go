package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// checkEachDecidedOnce: the batch has n results, one per AC, each decided by that AC's
// single verdict event, and the stream holds exactly n verdicts and n decisions.
func checkEachDecidedOnce(t *testing.T, env *Env, sub client.Submission, res *client.Results, n int) {
	t.Helper()
	if res.Summary.Total != n || res.Summary.Compared != n || len(res.Rows) != n {
		t.Fatalf("summary %+v with %d rows, want %d compared", res.Summary, len(res.Rows), n)
	}
	seen := map[string]bool{}
	for _, r := range res.Rows {
		if seen[r.ACID] {
			t.Fatalf("AC %s has two result rows", r.ACID)
		}
		seen[r.ACID] = true
		if r.Status != string(events.StatusCompared) {
			t.Errorf("AC %s: status %s (%s)", r.ACID, r.Status, r.Reason)
		}
	}
	recs := env.jobs(sub.BatchID)
	if len(recs) != n {
		t.Fatalf("%d job records, want %d", len(recs), n)
	}
	for _, r := range recs {
		want := events.NewID(events.TypeVerdictEmitted, e2eTenant, sub.BatchID, r.ACID, r.Iteration, "")
		if r.DecidedBy != want {
			t.Errorf("AC %s decided by %q, want its verdict %q", r.ACID, r.DecidedBy, want)
		}
	}
	if c := env.subjectCount(events.AnyTenant(events.TypeVerdictEmitted)); c != uint64(n) {
		t.Errorf("stream holds %d verdict.emitted, want exactly %d", c, n)
	}
	// The last job's decision and the completion are published just after the batch is
	// recorded complete: wait for them, then require exact counts.
	WaitBatchCompleted(t, env.JS(), e2eTenant, sub.BatchID)
	poll.Until(t, 10*time.Second, "every decision in the stream", func() (bool, string) {
		c := env.subjectCount(events.AnyTenant(events.TypeIterationDecided))
		return c >= uint64(n), fmt.Sprint(c)
	})
	if c := env.subjectCount(events.AnyTenant(events.TypeIterationDecided)); c != uint64(n) {
		t.Errorf("stream holds %d iteration.decided, want exactly %d", c, n)
	}
	if c := env.subjectCount(events.AnyTenant(events.TypeBatchCompleted)); c != 1 {
		t.Errorf("stream holds %d batch.completed, want 1", c)
	}
}

// TestCompetingJudges: two judge instances share the judge consumer; every AC is judged
// by exactly one of them and both take part.
func TestCompetingJudges(t *testing.T) {
	const n = 200
	env := NewEnv(t)
	env.pipeline()
	// A little latency keeps each instance busy so the work spreads, as real calls do.
	p1, p2 := scriptedLatency(t, 5*time.Millisecond), scriptedLatency(t, 5*time.Millisecond)
	env.Start(p1, "judge-1", bus.Judge)
	env.Start(p2, "judge-2", bus.Judge)
	sub := env.Submit(WriteBatch(t, TextBatch(n, "")), e2eTenant)
	res := env.Wait(sub, 60*time.Second)
	checkEachDecidedOnce(t, env, sub, res, n)
	c1, c2 := p1.Calls(), p2.Calls()
	t.Logf("judge-1 made %d calls, judge-2 %d", c1, c2)
	if c1+c2 != n {
		t.Errorf("provider calls %d + %d = %d, want %d: some AC was judged twice or not at all", c1, c2, c1+c2, n)
	}
	if c1 == 0 || c2 == 0 {
		t.Errorf("one judge instance did all the work (%d / %d): the consumer is not shared", c1, c2)
	}
}

// TestJudgesStopMidBatch: one judge instance shut down gracefully and another killed
// (its connection cut, its router never closed) while a batch runs; a fresh instance
// finishes it. No AC is lost and none is decided twice.
func TestJudgesStopMidBatch(t *testing.T) {
	const n = 300
	env := NewEnv(t) // AckWait 5 s: what a killed instance held comes back after that
	pipe := env.pipeline()
	graceful := recordCalls(scriptedLatency(t, 20*time.Millisecond))
	// The crashing instance is slower, so it always holds calls in flight when it dies.
	crashing := recordCalls(scriptedLatency(t, 300*time.Millisecond))
	g := env.startOn(env.Conn(), graceful, "judge-graceful", 4, bus.Judge)
	crashConn := env.rawConn()
	env.startOn(crashConn, crashing, "judge-crash", 4, bus.Judge)

	sub := env.Submit(WriteBatch(t, TextBatch(n, "")), e2eTenant)
	poll.Until(t, 30*time.Second, "some verdicts, and a fresh call in flight on the crashing instance", func() (bool, string) {
		done := env.progress(pipe, sub.BatchID, n)
		age, busy := crashing.newestInFlight()
		return done >= 20 && busy && age < 100*time.Millisecond, fmt.Sprintf("%d/%d done, crash instance busy %v (newest %s)", done, n, busy, age)
	})
	// Crash: the connection goes, nothing is acked or handed back.
	crashConn.Close()
	killed := time.Now()
	// Graceful: in-flight calls are cancelled and handed back, nothing more is pulled.
	// (Messages it had pulled but not started are not handed back today; they return
	// after AckWait like the crashed instance's: see pkg/bus
	// TestGracefulCloseReturnsMessages.)
	g.Close()
	done := env.progress(pipe, sub.BatchID, n)
	if done >= n {
		t.Fatalf("batch finished (%d/%d) before the judges were stopped: the test proves nothing", done, n)
	}
	t.Logf("stopped both judges at %d/%d decided", done, n)

	fresh := recordCalls(scriptedLatency(t, 0))
	env.Start(fresh, "judge-fresh", bus.Judge)
	res := env.Wait(sub, 45*time.Second)
	checkEachDecidedOnce(t, env, sub, res, n)

	gc, cc, fc := graceful.Snapshot(), crashing.Snapshot(), fresh.Snapshot()
	t.Logf("calls: graceful %d, crashed %d, fresh %d; finished after %s", len(gc), len(cc), len(fc), time.Since(killed).Round(time.Millisecond))
	// Provider calls may exceed n: a call whose verdict was never stored (the crashed
	// instance could not publish it; the graceful one cancelled it) is made again by
	// the instance that gets the redelivery, and a verdict stored just before the crash
	// whose ack was lost is recomputed and dropped as a duplicate by its event id. What
	// may never exceed n is the verdicts stored, checked above.
	if total := len(gc) + len(cc) + len(fc); total < n {
		t.Errorf("%d provider calls for %d ACs", total, n)
	}
	judged := callsByKey(gc)
	for k, c := range callsByKey(cc) {
		judged[k] += c
	}
	for k, c := range callsByKey(fc) {
		judged[k] += c
	}
	if len(judged) != n {
		t.Errorf("%d ACs reached a provider, want %d", len(judged), n)
	}
	// What the crashed instance held when it died came back to the fresh instance.
	freshKeys := callsByKey(fc)
	lost := 0
	for _, c := range cc {
		if c.End.After(killed) {
			lost++
			if freshKeys[c.Req.Key] == 0 {
				t.Errorf("AC %s was in flight on the crashed instance and never judged again", c.Req.Key)
			}
		}
	}
	if lost == 0 {
		t.Fatalf("the crashed instance held no call in flight: the crash was not exercised")
	}
	t.Logf("%d calls were in flight on the crashed instance and were redelivered", lost)
}
