package bus_test

// A shutdown (SIGTERM) that arrives while a paid handler call is under way.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// graceRouter runs a renderer router whose subscriber has the given shutdown grace.
// stop stops it and returns when Close has returned.
func graceRouter(t *testing.T, e *routerEnv, grace time.Duration, h bus.Handler) (stop func()) {
	t.Helper()
	sub := bus.NewSubscriber(e.js, bus.SubscriberConfig{AckWait: e.cfg.AckWait, Concurrency: 4, ShutdownGrace: grace,
		NakBase: 10 * time.Millisecond, NakMax: 20 * time.Millisecond})
	r, err := bus.NewRouter(bus.RouterConfig{Service: bus.Renderer, MaxDeliver: e.cfg.MaxDeliver, CloseTimeout: grace + 10*time.Second}, sub, e.pub, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(context.Background()) }()
	<-r.Running()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			_ = r.Close()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestShutdownFinishesCallsInFlight: a shutdown (SIGTERM) while a handler's call is under
// way lets the call finish within the grace period: its output is published and its
// input acked, so the paid call is not thrown away and made again elsewhere.
func TestShutdownFinishesCallsInFlight(t *testing.T) {
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 5})
	started := make(chan struct{}, 1)
	var calls, cancelled atomic.Int32
	stop := graceRouter(t, e, 20*time.Second, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		calls.Add(1)
		started <- struct{}{}
		select { // a provider call that takes 1.5 s and honours its context
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			cancelled.Add(1)
			return nil, ctx.Err()
		}
		return []events.Event{renderDoneFor(ev, 1)}, nil
	})
	in := renderEvent("AC-1")
	if err := e.pub.PublishEvents(in); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	stop() // returns once the in-flight handler has settled
	if n := cancelled.Load(); n != 0 {
		t.Fatalf("the call in flight was cancelled by the shutdown (%d)", n)
	}
	if n := natstest.SubjectCount(t, e.js, "tribunal.*.render.done"); n != 1 {
		t.Fatalf("%d render.done stored after the shutdown, want the call's 1", n)
	}
	if info := e.consumer(t, bus.Renderer); info.NumAckPending != 0 || info.NumPending != 0 || info.Delivered.Consumer != 1 {
		t.Fatalf("input not acked once: ack pending %d, pending %d, delivered %d", info.NumAckPending, info.NumPending, info.Delivered.Consumer)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1", n)
	}
}

// TestShutdownGraceThenHandBack: a call still running when the grace period ends is
// cancelled then (not at the signal) and its message handed back at once, so another
// instance takes it without waiting out AckWait.
func TestShutdownGraceThenHandBack(t *testing.T) {
	const grace = time.Second
	// AckWait 30 s: a redelivery well before it can only come from the nak.
	e := newRouterEnv(t, bus.Config{AckWait: 30 * time.Second, MaxDeliver: 5})
	started := make(chan struct{}, 1)
	var cancelledAfter atomic.Int64
	var closing atomic.Int64
	stop := graceRouter(t, e, grace, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		started <- struct{}{}
		<-ctx.Done() // a call that outlasts any grace
		cancelledAfter.Store(time.Now().UnixNano() - closing.Load())
		return nil, ctx.Err()
	})
	if err := e.pub.PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	closing.Store(time.Now().UnixNano())
	stop()
	if d := time.Duration(cancelledAfter.Load()); d < grace {
		t.Fatalf("call cancelled %s after the shutdown began, before the %s grace", d, grace)
	}
	handled := make(chan string, 4)
	e.run(t, bus.Renderer, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		handled <- ev.JobID
		return nil, nil
	})
	select {
	case id := <-handled:
		if id != "AC-1" {
			t.Fatalf("handled %s", id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the cancelled message was not handed back (a new instance got nothing)")
	}
	poll.Until(t, 10*time.Second, "the message to be acked", e.settled(t, bus.Renderer))
}
