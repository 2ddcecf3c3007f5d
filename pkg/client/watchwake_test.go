package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestWatchWakesOnCompletion: a batch's completion ends Watch when it is written, not at
// the next tick (an hour here), so `tribunal run` returns as soon as its batch is done.
func TestWatchWakesOnCompletion(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{})
	b, err := bus.OpenBuckets(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	key := records.BatchKey("team-a", "b1")
	put := func(h records.Batch) {
		data, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Batches.Put(t.Context(), key, data); err != nil {
			t.Fatal(err)
		}
	}
	h := records.Batch{Tenant: "team-a", Batch: "b1", Size: 1, CreatedAt: time.Now()}
	put(h)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	reported := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		comp, err := client.Watch(ctx, b, "team-a", "b1", time.Hour, func(client.Progress) {
			select {
			case reported <- struct{}{}:
			default:
			}
		})
		if err == nil && (comp == nil || comp.By != "aggregator-1") {
			err = context.Canceled
		}
		done <- err
	}()
	<-reported // the first read saw the batch incomplete; the next tick is an hour away
	h.Completion = &records.Completion{At: time.Now(), By: "aggregator-1"}
	put(h)
	if err := <-done; err != nil {
		t.Fatalf("Watch did not return the completion written after its first read: %v", err)
	}
}
