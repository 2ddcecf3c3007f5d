package bus_test

// An output that cannot be published must end in a dead letter, not in redeliveries.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// renderDoneFor is the renderer's output for its input in, with a Blocked reason of
// reasonBytes bytes: a stand-in for an answer that came back too long.
func renderDoneFor(in events.Event, reasonBytes int) events.Event {
	spec := in.Payload.(*events.RenderRequested).Spec
	return events.New(&events.RenderDone{Spec: spec, Blocked: strings.Repeat("x", reasonBytes)}, in.Tenant, in.BatchID, in.JobID, in.Iteration, "", &in.Envelope)
}

// TestOversizedOutputDeadLettersAtOnce: a handler whose output is over the server's max
// payload (1 MiB by default) can never have it published. The input goes to dead
// letters after one handler call, with a reason naming the event type and its size,
// instead of being redelivered (each time a new paid provider call) forever.
func TestOversizedOutputDeadLettersAtOnce(t *testing.T) {
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 5})
	limit := e.nc.MaxPayload()
	var calls atomic.Int32
	e.run(t, bus.Renderer, bus.RouterConfig{MaxRetries: 2, RetryInitial: 5 * time.Millisecond},
		func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			calls.Add(1)
			return []events.Event{renderDoneFor(ev, int(limit)+1)}, nil
		})
	in := renderEvent("AC-1")
	if err := e.pub.PublishEvents(in); err != nil {
		t.Fatal(err)
	}
	checkDeadLetter(t, oneDeadLetter(t, e, bus.Renderer, 20*time.Second), in, "render.done", "max payload", fmt.Sprintf("over the limit of %d", limit))
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1: an output too large to publish never fits", n)
	}
	if info := e.consumer(t, bus.Renderer); info.Delivered.Consumer != 1 {
		t.Fatalf("input delivered %d times, want 1", info.Delivered.Consumer)
	}
	if n := natstest.SubjectCount(t, e.js, "tribunal.*.render.done"); n != 0 {
		t.Fatalf("%d render.done stored", n)
	}
}

// TestPublisherRefusesOversizedEvent: the size is checked before anything is sent, and
// the error names the event type and both sizes.
func TestPublisherRefusesOversizedEvent(t *testing.T) {
	e := newRouterEnv(t, bus.Config{})
	ev := renderDoneFor(renderEvent("AC-1"), int(e.nc.MaxPayload()))
	err := e.pub.PublishEvents(ev)
	if !errors.Is(err, bus.ErrPayloadTooLarge) || !bus.IsPermanent(err) {
		t.Fatalf("publish of an oversized event: %v; want ErrPayloadTooLarge, permanent", err)
	}
	for _, want := range []string{"render.done", ev.ID, fmt.Sprintf("over the limit of %d", e.nc.MaxPayload())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestPublishFailuresCountTowardMaxDeliver: a publish that keeps failing for a reason
// that might pass (here the stream refuses more messages on the output's subject) is a
// failed delivery like a handler error: redelivered with backoff, then dead-lettered at
// MaxDeliver with the publish error as the reason.
func TestPublishFailuresCountTowardMaxDeliver(t *testing.T) {
	const maxDeliver = 3
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: maxDeliver})
	ctx := ctxT(t)
	// The output's subject already holds its one allowed message; the dead-letter
	// subject is empty, so only the handler's output is refused.
	st, err := e.js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Discard, cfg.DiscardNewPerSubject, cfg.MaxMsgsPerSubject = jetstream.DiscardNew, true, 1
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.pub.PublishEvents(renderDoneFor(renderEvent("AC-0"), 1)); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	e.run(t, bus.Renderer, bus.RouterConfig{MaxRetries: 2, RetryInitial: 5 * time.Millisecond},
		func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			calls.Add(1)
			return []events.Event{renderDoneFor(ev, 1)}, nil
		})
	in := renderEvent("AC-1")
	if err := e.pub.PublishEvents(in); err != nil {
		t.Fatal(err)
	}
	checkDeadLetter(t, oneDeadLetter(t, e, bus.Renderer, 30*time.Second), in, fmt.Sprintf("after %d deliveries", maxDeliver), "outputs of "+in.ID)
	if info := e.consumer(t, bus.Renderer); info.Delivered.Consumer != maxDeliver {
		t.Fatalf("input delivered %d times, want MaxDeliver=%d", info.Delivered.Consumer, maxDeliver)
	}
	// A failed publish is not retried in process by re-running the handler.
	if n := calls.Load(); n != maxDeliver {
		t.Fatalf("handler called %d times, want one per delivery (%d)", n, maxDeliver)
	}
}

// oneDeadLetter waits for service's input to be dead-lettered and settled, and returns
// the one dead letter it must make.
func oneDeadLetter(t *testing.T, e *routerEnv, service string, timeout time.Duration) *jetstream.RawStreamMsg {
	t.Helper()
	poll.Until(t, timeout, "a dead letter", func() (bool, string) {
		n := natstest.SubjectCount(t, e.js, events.DeadLetterSubject(service))
		return n > 0, fmt.Sprintf("%d dead letters", n)
	})
	poll.Until(t, 10*time.Second, "the input to be settled", e.settled(t, service))
	dls := deadLetters(t, e.js, service)
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	return dls[0]
}
