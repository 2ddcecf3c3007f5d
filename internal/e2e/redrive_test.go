package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openaiapi "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

// TestProviderDownThenRedrive: a provider that answers 500 to everything leaves its ACs
// blocked and named, never passed; once it recovers, `redrive` sends exactly those ACs
// through again and the batch completes with every result.
func TestProviderDownThenRedrive(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	env, fake := fakeJudge(t, fakellm.Options{Respond: func(openaiapi.ChatCompletionRequest, int) fakellm.Reply {
		if down.Load() {
			return fakellm.Reply{Status: 500, Content: "model server is down"}
		}
		return fakellm.Reply{Content: `{"raw_winner":"A","confidence":0.9,"biggest_gap":"g"}`}
	}})
	files := TextBatch(6, "")
	files["batch.yaml"] += "  - id: AC-missing\n    criterion: c\n    ours: nope.md\n    reference: ref/0.md\n"
	sub := env.Submit(WriteBatch(t, files), "team-a")
	res := env.Wait(sub, 60*time.Second)
	if res.Summary.Blocked != 7 || res.Summary.ExitCode != 4 {
		t.Fatalf("provider down: summary %+v", res.Summary)
	}
	for _, r := range res.Rows {
		if r.ACID != "AC-missing" && (r.Status != "blocked" || !strings.Contains(r.Reason, "judge unavailable") || !strings.Contains(r.Reason, "500")) {
			t.Fatalf("row %+v: want blocked, naming the unavailable judge", r)
		}
	}
	calls := fake.Calls()

	down.Store(false)
	r := env.clientRunning()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	attempt, jobs, err := client.Redrive(ctx, r.Buckets, r.Pub, sub.Tenant, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if attempt != 1 || len(jobs) != 7 {
		t.Fatalf("redrive attempt %d of %d jobs, want 1 of 7", attempt, len(jobs))
	}
	if _, err := client.WatchAttempt(ctx, r.Buckets, sub.Tenant, sub.BatchID, attempt, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err = client.Load(ctx, r.Buckets, env.Store, sub.Tenant, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Total != 7 || res.Summary.Compared != 6 || res.Summary.Blocked != 1 {
		t.Fatalf("after redrive: summary %+v", res.Summary)
	}
	if got := fake.Calls() - calls; got != 6 {
		t.Fatalf("redrive made %d provider calls, want 6 (the missing artifact stays blocked before any judge)", got)
	}
	// A second redrive only touches what is still blocked.
	attempt, jobs, err = client.Redrive(ctx, r.Buckets, r.Pub, sub.Tenant, sub.BatchID)
	if err != nil || attempt != 2 || len(jobs) != 1 || jobs[0] != "AC-missing" {
		t.Fatalf("second redrive: %d %v %v", attempt, jobs, err)
	}
	if _, err := client.WatchAttempt(ctx, r.Buckets, sub.Tenant, sub.BatchID, attempt, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The audit replays both redrives: each attempt's events under ids of their own, the
	// redriven outcomes replacing the blocked ones and all three completions re-derived.
	WaitAttemptCompleted(t, env.JS(), sub.Tenant, sub.BatchID, attempt)
	rep := auditBatch(t, env, sub.BatchID)
	if !rep.OK() {
		t.Fatalf("audit of the redriven batch: %d mismatches:%s", len(rep.Mismatches), auditDump(t, rep))
	}
	if len(rep.Batches) != 1 || rep.Batches[0].Attempt != 2 || rep.Batches[0].Summary == nil || rep.Batches[0].Summary.Compared != 6 {
		t.Fatalf("audit of the redriven batch re-derived %+v", rep.Batches)
	}
	// Each redrive's first request names its jobs (bus.MetaRedriveJobs): one read.
	if rep.Reads != 1 {
		t.Fatalf("the audit read the stream %d times: %s", rep.Reads, rep.ReadAgain)
	}
}

// TestRejudge: another model judges a completed batch again from its stored gated
// artifacts; its verdicts are recorded next to the old ones, no decision changes, nothing
// is rendered again, and the audit still finds the batch clean.
func TestRejudge(t *testing.T) {
	env := NewEnv(t)
	p := scriptedAll(t, nil)
	env.Start(p, "all", bus.Services...)
	files := TextBatch(4, "")
	files["batch.yaml"] += "  - {id: AC-crit, kind: critic, task: t, output: o}\n"
	sub := env.Submit(WriteBatch(t, files), "team-a")
	before := env.Wait(sub, 30*time.Second)
	renders := env.subjectCount("tribunal.team-a.render.requested")
	r := env.clientRunning()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := client.Rejudge(ctx, env.JS(), r.Pub, sub.Tenant, sub.BatchID, "model-b")
	if err != nil || n != 5 {
		t.Fatalf("rejudge sent %d: %v", n, err)
	}
	rows, err := client.RejudgeResults(ctx, env.JS(), r.Buckets, sub.Tenant, sub.BatchID, "model-b", n)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.Judge != "scripted/model-b" || !row.Agree {
			t.Fatalf("rejudge row %+v", row)
		}
	}
	after, err := client.Load(ctx, r.Buckets, env.Store, sub.Tenant, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before.Rows {
		if before.Rows[i].Judge != after.Rows[i].Judge || before.Rows[i].Status != after.Rows[i].Status {
			t.Fatalf("a decision changed: %+v -> %+v", before.Rows[i], after.Rows[i])
		}
	}
	if got := env.subjectCount("tribunal.team-a.render.requested"); got != renders {
		t.Fatalf("rejudge rendered again: %d render requests, want %d", got, renders)
	}
	if got := env.subjectCount("tribunal.team-a.verdict.emitted"); got != 10 {
		t.Fatalf("%d verdicts in the stream, want 5 original and 5 rejudged", got)
	}
	rep := auditBatch(t, env, sub.BatchID)
	if !rep.OK() || rep.Rejudges == 0 {
		t.Fatalf("audit after a rejudge: %d rejudge events, %d mismatches:%s", rep.Rejudges, len(rep.Mismatches), auditDump(t, rep))
	}
}
