package bus_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestRedeliveryHorizonCoversAckWaitAndPublishTimeout: the window a live process needs
// spans every delivery's publishing (the publisher's timeout) and the wait before each
// redelivery (AckWait), whatever they are set to, and the all-in-one window covers the
// default horizon while staying minutes, not the two hours of the default window.
func TestRedeliveryHorizonCoversAckWaitAndPublishTimeout(t *testing.T) {
	for _, cfg := range []bus.Config{{}, {AckWait: 5 * time.Second, MaxDeliver: 1}, {AckWait: 2 * time.Minute, MaxDeliver: 3}, {MaxDeliver: 20}} {
		h := bus.RedeliveryHorizon(cfg)
		ackWait, deliveries := cmpOr(cfg.AckWait, 30*time.Second), time.Duration(cmpOr(cfg.MaxDeliver, 8))
		if floor := deliveries*bus.PublishTimeout + (deliveries-1)*ackWait; h < floor {
			t.Errorf("%+v: horizon %s, under %d publish timeouts and %d AckWaits (%s)", cfg, h, deliveries, deliveries-1, floor)
		}
		if h < bus.PublishTimeout {
			t.Errorf("%+v: horizon %s under one publish timeout", cfg, h)
		}
	}
	local, horizon := bus.LocalHorizon(), bus.RedeliveryHorizon(bus.Config{})
	if local < horizon || local > horizon+time.Minute || local >= bus.DefaultDuplicateWindow {
		t.Errorf("all-in-one horizon %s for a horizon of %s (default window %s)", local, horizon, bus.DefaultDuplicateWindow)
	}
	// The server's window covers one delivery's sends: a Publish and the router's two
	// in-process retries of the handler, and stays under the horizon the publisher covers.
	if w := bus.LocalDuplicateWindow(); w < 3*(bus.PublishTimeout+300*time.Millisecond) || w >= local {
		t.Errorf("all-in-one server window %s: want one delivery's sends (3 x %s) and under the horizon %s", w, bus.PublishTimeout, local)
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// TestRestartPastTheWindowStoresNoCopy: events are stored under a 1 s duplicate window,
// the server stops and starts again after the window, and a redelivered handler
// publishes the same ids. With the tail's ids handed to the publisher
// (ReadPublished, AlreadyPublished) nothing is stored again, on a subject read back and
// compared by its sequence as on a trusted one, and an id reused for another event fails
// as a Duplicate ack would make it fail; without them every copy is stored, which is
// what the set is there for; and once the set's window has passed it is dropped.
func TestRestartPastTheWindowStoresNoCopy(t *testing.T) {
	const n, window = 20, time.Second
	dir := t.TempDir()
	cfg := bus.Config{DuplicateWindow: window}
	ns, js := startStored(t, dir, cfg)
	var evs []events.Event
	for i := range n {
		evs = append(evs, renderEvent(fmt.Sprintf("AC-%d", i)))
	}
	if err := bus.NewPublisher(js).PublishEvents(evs...); err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	time.Sleep(window + 500*time.Millisecond)

	_, js = startStored(t, dir, cfg)
	set, err := bus.ReadPublished(ctxT(t), js, "TRIBUNAL", window)
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != n {
		t.Fatalf("restored %d ids, want %d", set.Len(), n)
	}
	if seq, ok := set.Seq(evs[3].ID); !ok || seq != 4 {
		t.Fatalf("id of the 4th event: seq %d, %v", seq, ok)
	}
	stored := func() uint64 {
		st, err := js.Stream(ctxT(t), "TRIBUNAL")
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	// What the redelivered handler publishes: the same ids, at a later time.
	again := func() []events.Event {
		var out []events.Event
		for i := range n {
			out = append(out, renderEvent(fmt.Sprintf("AC-%d", i)))
		}
		return out
	}

	compared := bus.NewPublisher(js, bus.AlreadyPublished(set))
	if err := compared.PublishEvents(again()...); err != nil {
		t.Fatalf("republish, read back: %v", err)
	}
	trusted := bus.NewPublisher(js, bus.TrustDuplicatesOf(bus.Aggregator), bus.AlreadyPublished(set))
	if err := trusted.PublishEvents(again()...); err != nil {
		t.Fatalf("republish, trusted: %v", err)
	}
	if got := stored(); got != n {
		t.Fatalf("%d messages stored after the republish with the tail's ids, want %d: no copy", got, n)
	}
	forged := renderEvent("AC-99")
	forged.ID = evs[0].ID
	if err := compared.PublishEvents(forged); !errors.Is(err, bus.ErrDuplicateMismatch) {
		t.Fatalf("another event under a restored id: %v, want ErrDuplicateMismatch", err)
	}

	// Switched off, the same republish stores every copy: the server forgot the ids.
	if err := bus.NewPublisher(js).PublishEvents(again()...); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != 2*n {
		t.Fatalf("%d messages stored after the republish without the tail's ids, want %d", got, 2*n)
	}

	// One window after the publisher took it, the set is gone.
	late := bus.NewPublisher(js, bus.AlreadyPublished(set))
	time.Sleep(window + 200*time.Millisecond)
	if err := late.PublishEvents(forged); err != nil {
		t.Fatalf("publish after the set's window: %v", err)
	}
	if got := stored(); got != 2*n+1 {
		t.Fatalf("%d messages stored, want %d: the set must be dropped after its window", got, 2*n+1)
	}
}

// startStored starts a file-storage server on dir, in process only, shut down at
// cleanup, and provisions it with cfg.
func startStored(t *testing.T, dir string, cfg bus.Config) (*server.Server, jetstream.JetStream) {
	t.Helper()
	ns, err := natsserver.Start(natsserver.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	// In process, as the all-in-one mode connects.
	nc, err := natsserver.InProcessConn(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctxT(t), js, cfg); err != nil {
		t.Fatal(err)
	}
	return ns, js
}

// TestProvisionShortensAnExistingWindow: a state folder made by an earlier build has the
// default two-hour window; provisioning it with the all-in-one's updates the stream in
// place, its messages kept.
func TestProvisionShortensAnExistingWindow(t *testing.T) {
	_, js := startStored(t, t.TempDir(), bus.Config{})
	if err := bus.NewPublisher(js).PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctxT(t), js, bus.Config{DuplicateWindow: bus.LocalDuplicateWindow()}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.Config.Duplicates != bus.LocalDuplicateWindow() || info.State.Msgs != 1 {
		t.Fatalf("window %s with %d messages, want %s with 1", info.Config.Duplicates, info.State.Msgs, bus.LocalDuplicateWindow())
	}
}

// TestSettledStreamRestoresNothing: when every durable has acknowledged all it was given
// and nothing waits for one (a batch that completed), no handler runs again, and the tail
// is not read.
func TestSettledStreamRestoresNothing(t *testing.T) {
	_, js := startStored(t, t.TempDir(), bus.Config{DuplicateWindow: time.Second})
	// An event no durable consumes.
	ev := events.New(&events.JobBlocked{Kind: events.KindAB, ACID: "AC-1", Stage: "judge", Reason: "test"}, testTenant, "batch-1", "AC-1", 0, "", nil)
	if err := bus.NewPublisher(js).PublishEvents(ev); err != nil {
		t.Fatal(err)
	}
	set, err := bus.ReadPublished(ctxT(t), js, "TRIBUNAL", time.Second)
	if err != nil || set.Len() != 0 {
		t.Fatalf("settled stream: %d ids restored, %v", set.Len(), err)
	}
	// One waiting for the renderer: the tail counts.
	if err := bus.NewPublisher(js).PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	set, err = bus.ReadPublished(ctxT(t), js, "TRIBUNAL", time.Second)
	if err != nil || set.Len() != 2 {
		t.Fatalf("a message pending: %d ids restored, %v, want 2", set.Len(), err)
	}
}

// TestPublisherKeepsItsIDsPastTheServerWindow: with the publisher's own index of stored
// ids (AlreadyPublished, here starting empty), the same ids published again after the
// server's window (1 s) has passed, as a redelivered handler publishes them, store no
// copy, event ids and others alike; an id reused for another event still fails; without
// the index every copy is stored, which is what the index is there for; and an id is
// dropped from it one horizon after it was stored.
func TestPublisherKeepsItsIDsPastTheServerWindow(t *testing.T) {
	const n, window = 20, time.Second
	_, js := startStored(t, t.TempDir(), bus.Config{DuplicateWindow: window})
	batch := func() []events.Event {
		var out []events.Event
		for i := range n {
			out = append(out, renderEvent(fmt.Sprintf("AC-%d", i)))
		}
		return out
	}
	// An id that is no event id (32 hex digits) takes the index's other path.
	raw := func() *message.Message {
		m := message.NewMessage("not-an-event-id", []byte("raw"))
		m.Metadata.Set(bus.MetaSubject, "tribunal."+testTenant+".render.requested")
		return m
	}
	stored := func() uint64 {
		st, err := js.Stream(ctxT(t), "TRIBUNAL")
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	live := bus.NewPublisher(js, bus.AlreadyPublished(bus.NewPublished("TRIBUNAL", time.Minute)))
	evs := batch()
	if err := live.PublishEvents(evs...); err != nil {
		t.Fatal(err)
	}
	if err := live.Publish("", raw()); err != nil {
		t.Fatal(err)
	}
	// Past the window with a margin: the server forgets its ids on a timer, which a
	// loaded machine runs late.
	time.Sleep(2 * window)

	if err := live.PublishEvents(batch()...); err != nil {
		t.Fatalf("republish past the server's window: %v", err)
	}
	if err := live.Publish("", raw()); err != nil {
		t.Fatalf("republish of the raw message: %v", err)
	}
	if got := stored(); got != n+1 {
		t.Fatalf("%d messages stored after the republish, want %d: no copy", got, n+1)
	}
	forged := renderEvent("AC-99")
	forged.ID = evs[0].ID
	if err := live.PublishEvents(forged); !errors.Is(err, bus.ErrDuplicateMismatch) {
		t.Fatalf("another event under a stored id: %v, want ErrDuplicateMismatch", err)
	}

	// Switched off, the same republish stores every copy: the server forgot the ids.
	if err := bus.NewPublisher(js).PublishEvents(batch()...); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != 2*n+1 {
		t.Fatalf("%d messages stored after the republish without the index, want %d", got, 2*n+1)
	}

	// A horizon of 1 s: an id is dropped within one horizon and an eighth of its store.
	short := bus.NewPublisher(js, bus.AlreadyPublished(bus.NewPublished("TRIBUNAL", time.Second)))
	ev := renderEvent("AC-short")
	if err := short.PublishEvents(ev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := short.PublishEvents(renderEvent("AC-short")); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != 2*n+3 {
		t.Fatalf("%d messages stored, want %d: the id must be dropped after the horizon", got, 2*n+3)
	}
}
