package aggregator_test

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// countingKV counts the calls made to a bucket, by method: each is a round trip to the
// server on a real bucket.
type countingKV struct {
	kv.KV
	mu    sync.Mutex
	calls map[string]int
}

func counting(kv kv.KV) *countingKV { return &countingKV{KV: kv, calls: map[string]int{}} }

func (c *countingKV) count(m string) { c.mu.Lock(); c.calls[m]++; c.mu.Unlock() }

func (c *countingKV) n(m string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.calls[m] }

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.count("Get")
	return c.KV.Get(ctx, key)
}

func (c *countingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	c.count("Create")
	return c.KV.Create(ctx, key, value, opts...)
}

// TestSubmissionRoundTrips: recording a batch's jobs costs one create per job and one
// header create per batch: a first submission reads no record (it is decided on none and
// created if absent), and the jobs after the first do not create their batch header
// again. A redelivered submission still finds its record and asks for the same render.
func TestSubmissionRoundTrips(t *testing.T) {
	env := handlertest.New(t)
	jobs, batches := counting(env.Buckets.Jobs), counting(env.Buckets.Batches)
	env.Buckets.Jobs, env.Buckets.Batches = jobs, batches
	agg := aggregator.New(env.Buckets, env.Store, quiet)
	all := env.Submitted(t, handlertest.Quickstart(), "team-a", "b1")
	subs := handlertest.Of(all, events.TypeJobSubmitted)
	renders := map[string]string{}
	for _, ev := range all {
		out, err := handlertest.Deliver(context.Background(), agg.Handle, ev)
		if err != nil {
			t.Fatalf("%s: %v", ev.JobID, err)
		}
		if r := handlertest.Of(out, events.TypeRenderRequested); len(r) == 1 {
			renders[ev.JobID] = r[0].ID
		}
	}
	if len(renders) == 0 {
		t.Fatal("no render asked for")
	}
	if got := jobs.n("Get"); got != 0 {
		t.Errorf("%d job reads for %d first submissions, want 0", got, len(subs))
	}
	if got := jobs.n("Create"); got != len(subs) {
		t.Errorf("%d job creates, want %d", got, len(subs))
	}
	// batch.opened stores the header; no job creates it again.
	if got := batches.n("Create"); got > 1 {
		t.Errorf("%d batch header creates for one batch, want at most 1", got)
	}
	recorded, err := records.New(env.Buckets).LoadJobs(context.Background(), "team-a", "b1")
	if err != nil || len(recorded) != len(subs) {
		t.Fatalf("%d job records, want %d: %v", len(recorded), len(subs), err)
	}

	// Redelivered: the record stands and the same render is asked for again.
	for _, ev := range subs {
		out, err := handlertest.Deliver(context.Background(), agg.Handle, ev)
		if err != nil {
			t.Fatalf("redelivered %s: %v", ev.JobID, err)
		}
		r := handlertest.Of(out, events.TypeRenderRequested)
		if want, ok := renders[ev.JobID]; ok && (len(r) != 1 || r[0].ID != want) {
			t.Errorf("redelivered %s asked for %v, want render %s", ev.JobID, r, want)
		}
	}
}
