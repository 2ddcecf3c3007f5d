package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestDeadLetterHandlerFailureRedelivers: a dead letter whose handler fails for the
// moment (the aggregator's store unreachable in a partition) is handed back and handled
// again, not acked and lost: the dead letter is the last input of its job, and for a job
// recorded final it is what announces the job's outcome and its batch's completion again.
// A failure no retry cures (bus.Permanent) is still logged and dropped.
func TestDeadLetterHandlerFailureRedelivers(t *testing.T) {
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 3})
	var dlCalls, handled atomic.Int32
	var permanentCalls atomic.Int32
	e.run(t, bus.Aggregator, bus.RouterConfig{MaxRetries: 1, RetryInitial: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond,
		DeadLetters: func(ctx context.Context, dl bus.DeadLetter) ([]events.Event, error) {
			ev, err := events.Decode(dl.Payload)
			if err != nil {
				return nil, err
			}
			if ev.JobID == "AC-permanent" {
				permanentCalls.Add(1)
				return nil, bus.Permanent(errors.New("the record does not decode"))
			}
			if dlCalls.Add(1) <= 4 {
				return nil, errors.New("load job: context deadline exceeded")
			}
			handled.Add(1)
			return nil, nil
		}},
		func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			return nil, bus.Permanent(errors.New("this input can never work"))
		})
	sub := func(job string) events.Event {
		spec := renderEvent(job).Payload.(*events.RenderRequested).Spec
		return events.New(&events.JobSubmitted{Spec: spec, BatchSize: 1}, testTenant, "batch-1", job, 0, "", nil)
	}
	if err := e.pub.PublishEvents(sub("AC-1"), sub("AC-permanent")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the dead letter handled once its handler recovers", func() (bool, string) {
		return handled.Load() == 1, fmt.Sprintf("%d calls, handled %d", dlCalls.Load(), handled.Load())
	})
	poll.Until(t, 10*time.Second, "every message settled", e.settled(t, bus.Aggregator))
	if n := permanentCalls.Load(); n != 1 {
		t.Fatalf("a dead letter failing for good was handled %d times, want once", n)
	}
}
