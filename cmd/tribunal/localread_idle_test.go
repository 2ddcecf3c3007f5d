package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestAggregatorIdleCountsWhatWasJustPublished: inputs of the aggregator published just
// now, which no aggregator took, keep the folder busy however soon it is asked (the
// server counts a stored message into a consumer's pending only later, from a goroutine
// of its own); once they are taken and acknowledged, it is idle.
func TestAggregatorIdleCountsWhatWasJustPublished(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{})
	ctx := context.Background()
	subj, err := events.Subject("team-a", bus.ServiceInputs[bus.Aggregator][0])
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for round := range 5 {
		for range n {
			if _, err := js.Publish(ctx, subj, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		stream, err := js.Stream(ctx, localStream)
		if err != nil {
			t.Fatal(err)
		}
		if behind, err := consumerBehind(ctx, stream, bus.ConsumerName(bus.Aggregator)); err != nil || behind == 0 {
			t.Fatalf("round %d: %d behind (%v) with %d inputs published and none taken", round, behind, err, n)
		}
		c, err := stream.Consumer(ctx, bus.ConsumerName(bus.Aggregator))
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.Fetch(n, jetstream.FetchMaxWait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got != n {
			t.Fatalf("round %d: fetched %d of %d", round, got, n)
		}
		if err := aggregatorIdle(ctx, js, time.Minute); err != nil {
			t.Fatalf("round %d: all %d taken and acknowledged: %v", round, n, err)
		}
	}
}
