package aggregator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// TestCompletionReadsPendingRecordsAgain: the completion runs once every job is marked
// done, so a record it reads still pending is an old copy (a scan's consumer on a member
// behind the stream); folding it completed a 1,000-AC batch of TestClusterPartitions
// with 469 jobs as schema violations. The completion reads again until no record is
// pending, and gives up, naming the job, when one stays so.
func TestCompletionReadsPendingRecordsAgain(t *testing.T) {
	env := handlertest.New(t)
	hs, agg := handlers(env, handlertest.QuickstartProvider(t))
	handlertest.Drive(t, hs, env.Submitted(t, handlertest.Quickstart(), "team-a", "b1")...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := records.New(env.Buckets)
	jobs, err := st.LoadJobs(ctx, "team-a", "b1")
	if err != nil || len(jobs) == 0 {
		t.Fatalf("%d jobs: %v", len(jobs), err)
	}
	last := jobs[len(jobs)-1]
	restore := aggregator.SetCompletePause(2 * time.Millisecond)
	defer restore()
	want, err := aggregator.FoldFinal(ctx, agg, last)
	if err != nil || want.Total != len(jobs) {
		t.Fatalf("every record final: total %d of %d, %v", want.Total, len(jobs), err)
	}

	final, rev, err := st.Job(ctx, "team-a", "b1", jobs[0].ACID)
	if err != nil {
		t.Fatal(err)
	}
	stale := *final
	stale.Status, stale.Decided = events.StatusPending, nil
	if err := st.PutJob(ctx, &stale, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := aggregator.FoldFinal(ctx, agg, last); err == nil || !strings.Contains(err.Error(), "1 jobs read still pending ("+jobs[0].ACID+" first)") {
		t.Fatalf("a record that stays pending: want the completion to give up naming %s, got %v", jobs[0].ACID, err)
	}

	// The record becomes current while the completion waits: it completes, all of it.
	_, rev, err = st.Job(ctx, "team-a", "b1", jobs[0].ACID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		if err := st.PutJob(ctx, final, rev); err != nil {
			t.Error(err)
		}
	}()
	got, err := aggregator.FoldFinal(ctx, agg, last)
	if err != nil || got.Total != want.Total || got.ExitCode != want.ExitCode || got.Compared != want.Compared {
		t.Fatalf("a record current again: total %d, compared %d, exit %d (%v); want %d, %d, %d",
			got.Total, got.Compared, got.ExitCode, err, want.Total, want.Compared, want.ExitCode)
	}
}
