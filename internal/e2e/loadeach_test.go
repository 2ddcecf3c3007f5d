package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	openaiapi "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestLoadReadsOneRecordAtATime: client.Load, which `tribunal watch` and `results` use,
// builds a batch's results reading its job records one at a time (a 1,000,000-AC batch
// held at once took 9 GiB); they are the results built from every record held at once
// (LoadChecked, the rerun's), row for row and in the batch's order.
func TestLoadReadsOneRecordAtATime(t *testing.T) {
	env, _ := fakeJudge(t, fakellm.Options{Respond: func(openaiapi.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Content: `{"raw_winner":"A","confidence":0.9,"biggest_gap":"g"}`}
	}})
	const n = 60
	sub := env.Submit(WriteBatch(t, TextBatch(n, "")), "team-a")
	env.Wait(sub, 60*time.Second)
	r := env.clientRunning()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	each, err := client.Load(ctx, r.Buckets, env.Store, sub.Tenant, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	all, err := client.LoadChecked(ctx, r.Buckets, env.Store, sub.Tenant, sub.BatchID, func(_ *records.Batch, jobs []*records.Job) error {
		held = len(jobs)
		return nil
	})
	if err != nil || held != n {
		t.Fatalf("all at once: %d records, %v", held, err)
	}
	a, _ := json.Marshal(each)
	b, _ := json.Marshal(all)
	if string(a) != string(b) || len(each.Rows) != n {
		t.Fatalf("one at a time (%d rows):\n%s\nall at once:\n%s", len(each.Rows), a, b)
	}
}
