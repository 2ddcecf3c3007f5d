package judge_test

import (
	"context"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	judgesvc "github.com/tribunal-dev/tribunal/services/judge"
)

// TestJudgeModeChoosesTheProvider: a gated job is judged through the batch-mode provider
// when its mode is batch and the deployment allows it, directly otherwise; the same
// kind's judge makes both verdicts, and only the batched one says so.
func TestJudgeModeChoosesTheProvider(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	direct, err := openai.New(openai.Config{BaseURL: srv.BaseURL(), Model: "fake-model", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api, err := direct.BatchAPI()
	if err != nil {
		t.Fatal(err)
	}
	bp, err := batchmode.New(direct, api, memkv.New(batchmode.Bucket), batchmode.Config{Linger: time.Millisecond, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bp.Close)
	for _, c := range []struct {
		name        string
		allow       bool
		mode        string
		wantBatched bool
	}{
		{"batch allowed", true, events.JudgeModeBatch, true},
		{"batch forbidden", false, events.JudgeModeBatch, false},
		{"direct asked", true, events.JudgeModeDirect, false},
		{"none asked", true, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := handlertest.New(t)
			gd := gated(t, env, "AC-1")
			gd.Payload.(*events.GatesDone).JudgeMode = c.mode
			h := judgesvc.New(stage.JudgeEnv{Store: env.Store, Provider: direct, Cache: env.Buckets.Cache, Instance: "j1", Log: quiet},
				judgesvc.WithBatchMode(batchmode.Policy{AllowBatch: c.allow}, bp)).Handle
			calls, batches := srv.Calls(), srv.BatchesCreated()
			out, err := handlertest.Deliver(context.Background(), h, gd)
			if err != nil || len(out) != 1 {
				t.Fatalf("published %v, %v", out, err)
			}
			votes := out[0].Payload.(*events.VerdictEmitted).Votes
			if len(votes) != 1 || votes[0].Status != events.VoteOK || votes[0].Judge.Batch != c.wantBatched {
				t.Fatalf("votes %+v, want one ok vote, batched %v", votes, c.wantBatched)
			}
			newBatches, newCalls := srv.BatchesCreated()-batches, srv.Calls()-calls
			if c.wantBatched && (newBatches != 1 || newCalls != 0) || !c.wantBatched && (newBatches != 0 || newCalls != 1) {
				t.Fatalf("%d provider batches and %d direct calls", newBatches, newCalls)
			}
		})
	}
}
