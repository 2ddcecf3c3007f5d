package bus_test

// Integration tests of the bus on a real nats-server (natstest: in-process, random
// loopback port). They live in package bus_test because natstest imports bus.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

const testTenant = "team-a"

// renderEvent is a valid render.requested for job.
func renderEvent(job string) events.Event {
	spec := events.JobSpec{Kind: events.KindAB, ACID: job, Criterion: "c", KindPart: &ab.Spec{
		Ours:      events.Source{Name: "o.md", Error: "missing artifact: o.md"},
		Reference: events.Source{Name: "r.md", Error: "missing artifact: r.md"},
		Threshold: 0.75,
	}}
	return events.New(&events.RenderRequested{Spec: spec}, testTenant, "batch-1", job, 0, "", nil)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// snapshot is every stream config on the server and every consumer config of the
// tribunal stream: what Provision owns. Only Config is kept (no Created timestamps,
// no state).
type snapshot struct {
	Streams   map[string]jetstream.StreamConfig
	Consumers map[string]jetstream.ConsumerConfig
	// Created are the creation times, which must not move either: a second Provision
	// that deleted and recreated something would change them.
	Created map[string]time.Time
}

func takeSnapshot(t *testing.T, js jetstream.JetStream, stream string) snapshot {
	t.Helper()
	ctx := ctxT(t)
	s := snapshot{Streams: map[string]jetstream.StreamConfig{}, Consumers: map[string]jetstream.ConsumerConfig{}, Created: map[string]time.Time{}}
	lister := js.ListStreams(ctx)
	for info := range lister.Info() {
		s.Streams[info.Config.Name] = info.Config
		s.Created["stream "+info.Config.Name] = info.Created
	}
	if err := lister.Err(); err != nil {
		t.Fatalf("list streams: %v", err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cl := st.ListConsumers(ctx)
	for info := range cl.Info() {
		s.Consumers[info.Name] = info.Config
		s.Created["consumer "+info.Name] = info.Created
	}
	if err := cl.Err(); err != nil {
		t.Fatalf("list consumers: %v", err)
	}
	// Provision owns the event stream, four KV buckets and one durable per service.
	if len(s.Streams) != 5 || len(s.Consumers) != len(bus.Services) {
		t.Fatalf("provisioned %d streams and %d consumers, want 5 and %d: %v / %v", len(s.Streams), len(s.Consumers), len(bus.Services), keys(s.Streams), keys(s.Consumers))
	}
	return s
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sameSnapshot(t *testing.T, label string, a, b snapshot) {
	t.Helper()
	for name, ca := range a.Streams {
		if cb, ok := b.Streams[name]; !ok || !reflect.DeepEqual(ca, cb) {
			t.Errorf("%s: stream %s config changed:\n before %+v\n after  %+v", label, name, ca, cb)
		}
	}
	for name, ca := range a.Consumers {
		if cb, ok := b.Consumers[name]; !ok || !reflect.DeepEqual(ca, cb) {
			t.Errorf("%s: consumer %s config changed:\n before %+v\n after  %+v", label, name, ca, cb)
		}
	}
	if len(a.Streams) != len(b.Streams) || len(a.Consumers) != len(b.Consumers) {
		t.Errorf("%s: %d/%d streams, %d/%d consumers", label, len(a.Streams), len(b.Streams), len(a.Consumers), len(b.Consumers))
	}
}

// TestProvisionIdempotent: a second Provision changes no stream or consumer config and
// recreates nothing (creation times and stored messages survive).
func TestProvisionIdempotent(t *testing.T) {
	cfg := bus.Config{AckWait: 3 * time.Second, MaxDeliver: 4, DuplicateWindow: time.Minute, MaxAge: time.Hour}
	_, _, js := natstest.Provisioned(t, cfg)
	first := takeSnapshot(t, js, "TRIBUNAL")
	if err := bus.NewPublisher(js).PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctxT(t), js, cfg); err != nil {
		t.Fatalf("second provision: %v", err)
	}
	second := takeSnapshot(t, js, "TRIBUNAL")
	sameSnapshot(t, "provision twice", first, second)
	if !reflect.DeepEqual(first.Created, second.Created) {
		t.Errorf("second provision recreated something: %v -> %v", first.Created, second.Created)
	}
	st, err := js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("stream holds %d messages after re-provisioning, want the 1 published before", n)
	}
	// The settings asked for are the settings applied.
	c := first.Consumers[bus.ConsumerName(bus.Judge)]
	// MaxDeliver is enforced by the routers; the server-side consumer is unbounded so a
	// delivery interrupted by a shutdown is never dropped.
	if c.AckWait != cfg.AckWait || c.MaxDeliver != -1 || c.AckPolicy != jetstream.AckExplicitPolicy || c.Durable != bus.ConsumerName(bus.Judge) {
		t.Errorf("judge consumer config %+v", c)
	}
	if s := first.Streams["TRIBUNAL"]; s.Duplicates != cfg.DuplicateWindow || s.MaxAge != cfg.MaxAge {
		t.Errorf("stream config %+v", s)
	}
}

// TestProvisionConcurrent: two instances provisioning a fresh server at the same moment
// both succeed and leave exactly the configs one sequential Provision leaves.
func TestProvisionConcurrent(t *testing.T) {
	cfg := bus.Config{AckWait: 3 * time.Second, MaxDeliver: 4}
	_, _, ref := natstest.Provisioned(t, cfg)
	want := takeSnapshot(t, ref, "TRIBUNAL")
	for round := 0; round < 3; round++ {
		srv := natstest.Start(t)
		_, js1 := srv.Connect(t)
		_, js2 := srv.Connect(t)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for i, js := range []jetstream.JetStream{js1, js2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = bus.Provision(context.Background(), js, cfg)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: concurrent provision %d: %v", round, i, err)
			}
		}
		got := takeSnapshot(t, js1, "TRIBUNAL")
		sameSnapshot(t, fmt.Sprintf("round %d: concurrent vs sequential", round), want, got)
		if err := bus.Provision(ctxT(t), js2, cfg); err != nil {
			t.Fatal(err)
		}
		sameSnapshot(t, fmt.Sprintf("round %d: after a third provision", round), got, takeSnapshot(t, js1, "TRIBUNAL"))
	}
}

// TestPublishEventsDeduplicates: the event id is the Nats-Msg-Id, so publishing the same
// event twice (or the same logical step rebuilt later) stores one message.
func TestPublishEventsDeduplicates(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	pub := bus.NewPublisher(js)
	ev := renderEvent("AC-1")
	for i := 0; i < 2; i++ {
		if err := pub.PublishEvents(ev); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// The same logical step built again (a redelivered handler): new time, same id.
	again := renderEvent("AC-1")
	if again.ID != ev.ID {
		t.Fatalf("event ids are not deterministic: %s vs %s", ev.ID, again.ID)
	}
	if err := pub.PublishEvents(again); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	st, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages after publishing one event three times, want 1", info.State.Msgs)
	}
	// The stored message carries the event id as its message id ...
	stored, err := st.GetMsg(ctx, info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Header.Get(jetstream.MsgIDHeader); got != ev.ID {
		t.Fatalf("stored Nats-Msg-Id %q, want event id %q", got, ev.ID)
	}
	if subj, _ := events.Subject(testTenant, events.TypeRenderRequested); stored.Subject != subj {
		t.Fatalf("stored on %s, want %s", stored.Subject, subj)
	}
	// ... so the server reports the next copy as a duplicate.
	data, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, stored.Subject, data, jetstream.WithMsgID(ev.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Duplicate {
		t.Fatalf("PubAck %+v: want Duplicate", ack)
	}
	// A different event is not a duplicate.
	if err := pub.PublishEvents(renderEvent("AC-2")); err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(ctx); info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2", info.State.Msgs)
	}
}

// routerEnv runs one service's router over a provisioned server.
type routerEnv struct {
	js   jetstream.JetStream
	nc   *nats.Conn
	cfg  bus.Config
	pub  *bus.Publisher
	stop func()
}

func newRouterEnv(t *testing.T, cfg bus.Config) *routerEnv {
	t.Helper()
	cfg.Memory = true
	_, nc, js := natstest.Provisioned(t, cfg)
	return &routerEnv{js: js, nc: nc, cfg: cfg, pub: bus.NewPublisher(js)}
}

// run starts service's router with handler; it stops at cleanup.
func (e *routerEnv) run(t *testing.T, service string, rc bus.RouterConfig, h bus.Handler) {
	t.Helper()
	sub := bus.NewSubscriber(e.js, bus.SubscriberConfig{AckWait: e.cfg.AckWait, Concurrency: 4, NakBase: 20 * time.Millisecond, NakMax: 100 * time.Millisecond})
	rc.Service = service
	rc.MaxDeliver = e.cfg.MaxDeliver
	rc.CloseTimeout = 10 * time.Second
	r, err := bus.NewRouter(rc, sub, e.pub, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(context.Background())
	}()
	select {
	case <-r.Running():
	case <-time.After(10 * time.Second):
		t.Fatal("router did not start")
	}
	t.Cleanup(func() {
		_ = r.Close()
		<-done
	})
}

func (e *routerEnv) consumer(t *testing.T, service string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := e.js.Consumer(ctxT(t), "TRIBUNAL", bus.ConsumerName(service))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// settled reports a consumer with nothing pending and nothing unacknowledged.
func (e *routerEnv) settled(t *testing.T, service string) func() (bool, string) {
	return func() (bool, string) {
		info := e.consumer(t, service)
		return info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Consumer > 0,
			fmt.Sprintf("pending %d, ack pending %d, delivered %d", info.NumPending, info.NumAckPending, info.Delivered.Consumer)
	}
}

// TestLongHandlerNotRedelivered: a handler working past AckWait keeps its message
// (the subscriber sends InProgress), so it runs exactly once.
func TestLongHandlerNotRedelivered(t *testing.T) {
	e := newRouterEnv(t, bus.Config{AckWait: time.Second, MaxDeliver: 5})
	var calls atomic.Int32
	finished := make(chan int32, 4)
	e.run(t, bus.Renderer, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		calls.Add(1)
		// The handler's work: 2.5 AckWaits. Without InProgress the server redelivers
		// after 1 s and again after 2 s, while this call still runs.
		select {
		case <-time.After(2500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		finished <- calls.Load()
		return nil, nil
	})
	if err := e.pub.PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-finished:
		if n != 1 {
			t.Fatalf("handler invoked %d times while the first call ran past AckWait: redelivered", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("handler did not finish")
	}
	poll.Until(t, 10*time.Second, "the message to be acked", e.settled(t, bus.Renderer))
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler invoked %d times, want 1", n)
	}
	if info := e.consumer(t, bus.Renderer); info.Delivered.Consumer != 1 || info.NumRedelivered != 0 {
		t.Fatalf("consumer delivered %d (redelivered %d), want 1 delivery", info.Delivered.Consumer, info.NumRedelivered)
	}
}

// deadLetters reads every message stored on the service's dead-letter subject.
func deadLetters(t *testing.T, js jetstream.JetStream, service string) []*jetstream.RawStreamMsg {
	t.Helper()
	return natstest.SubjectMsgs(t, js, events.DeadLetterSubject(service))
}

// checkDeadLetter checks one dead letter against the original event.
func checkDeadLetter(t *testing.T, dl *jetstream.RawStreamMsg, orig events.Event, reasonHas ...string) {
	t.Helper()
	want, err := events.Encode(orig)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := events.Subject(orig.Tenant, orig.Type)
	if !bytes.Equal(dl.Data, want) {
		t.Errorf("dead letter payload differs from the original bytes")
	}
	if got := dl.Header.Get(bus.MetaOriginalSubject); got != subj {
		t.Errorf("original subject header %q, want %q", got, subj)
	}
	if got := dl.Header.Get(bus.MetaOriginalID); got != orig.ID {
		t.Errorf("original id header %q, want %q", got, orig.ID)
	}
	reason := dl.Header.Get(bus.MetaReason)
	if bus.MetaReason != "reason_poisoned" || reason == "" {
		t.Errorf("reason header %s=%q", bus.MetaReason, reason)
	}
	for _, s := range reasonHas {
		if !strings.Contains(reason, s) {
			t.Errorf("reason %q does not mention %q", reason, s)
		}
	}
	if id := dl.Header.Get(jetstream.MsgIDHeader); id == "" || id == orig.ID {
		t.Errorf("dead letter message id %q: want its own id, not the original's", id)
	}
}

// TestRetriesExhaustedDeadLetter: a handler failing with a plain error on every delivery
// is delivered MaxDeliver times, then lands exactly once on tribunal._dlq.<service>
// with its reason, original subject and id, and its payload byte for byte.
func TestRetriesExhaustedDeadLetter(t *testing.T) {
	const maxDeliver = 3
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: maxDeliver})
	var calls atomic.Int32
	e.run(t, bus.Gater, bus.RouterConfig{MaxRetries: 1, RetryInitial: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond},
		func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			calls.Add(1)
			return nil, errors.New("storage is down")
		})
	rd := renderDone("AC-9")
	if err := e.pub.PublishEvents(rd); err != nil {
		t.Fatal(err)
	}
	checkDeadLetter(t, oneDeadLetter(t, e, bus.Gater, 20*time.Second), rd, "storage is down", fmt.Sprintf("after %d deliveries", maxDeliver))
	// JetStream delivered it MaxDeliver times; each delivery ran the handler
	// 1 + MaxRetries times in process.
	if info := e.consumer(t, bus.Gater); info.Delivered.Consumer != maxDeliver {
		t.Fatalf("consumer delivered %d times, want MaxDeliver=%d", info.Delivered.Consumer, maxDeliver)
	}
	if n := calls.Load(); n != maxDeliver*2 {
		t.Fatalf("handler invoked %d times, want %d deliveries x 2 attempts", n, maxDeliver)
	}
}

// TestPermanentErrorDeadLettersAtOnce: bus.Permanent skips both the in-process retries
// and JetStream's redeliveries.
func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 5})
	var calls atomic.Int32
	e.run(t, bus.Gater, bus.RouterConfig{MaxRetries: 3, RetryInitial: 5 * time.Millisecond},
		func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			calls.Add(1)
			return nil, bus.Permanent(errors.New("this input can never work"))
		})
	rd := renderDone("AC-3")
	if err := e.pub.PublishEvents(rd); err != nil {
		t.Fatal(err)
	}
	checkDeadLetter(t, oneDeadLetter(t, e, bus.Gater, 10*time.Second), rd, "this input can never work")
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler invoked %d times, want 1 (no retries for a permanent error)", n)
	}
	if info := e.consumer(t, bus.Gater); info.Delivered.Consumer != 1 {
		t.Fatalf("consumer delivered %d times, want 1", info.Delivered.Consumer)
	}
}

// renderDone is a valid render.done (the gater's input) for job.
func renderDone(job string) events.Event {
	spec := renderEvent(job).Payload.(*events.RenderRequested).Spec
	return events.New(&events.RenderDone{Spec: spec, Blocked: "missing artifact"}, testTenant, "batch-1", job, 0, "", nil)
}

// TestGracefulCloseReturnsMessages: closing a router (scale-down, deploy) hands back
// every message its instance held, in flight or pulled and still buffered, so another
// instance gets them at once instead of after AckWait (Subscriber.Close's contract:
// "returns messages that were pulled but not yet handled").
//
// It fails today: Subscriber.Close calls MessagesContext.Stop, which discards the
// iterator's buffer without a Nak, so a pulled-but-unstarted message stays checked out
// to the dead instance until AckWait. In-flight handlers do hand theirs back (ctx is
// cancelled, the handler fails, the subscriber naks). Proposed fix: Drain instead of
// Stop, and on close keep calling Next and Nak every buffered message until
// ErrMsgIteratorClosed.
func TestGracefulCloseReturnsMessages(t *testing.T) {
	const n, quick = 40, 8
	// AckWait 10 s and a 9 s deadline: every message must come back before the server
	// would have redelivered it on its own, with room for a loaded CI machine.
	e := newRouterEnv(t, bus.Config{AckWait: 10 * time.Second, MaxDeliver: 5})
	var blocked atomic.Int32
	sub := bus.NewSubscriber(e.js, bus.SubscriberConfig{AckWait: e.cfg.AckWait, Concurrency: 4, NakBase: 10 * time.Millisecond, NakMax: 20 * time.Millisecond,
		ShutdownGrace: 500 * time.Millisecond})
	r, err := bus.NewRouter(bus.RouterConfig{Service: bus.Gater, MaxDeliver: e.cfg.MaxDeliver, CloseTimeout: 10 * time.Second}, sub, e.pub,
		func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			if i, _ := strconv.Atoi(strings.TrimPrefix(ev.JobID, "AC-")); i < quick {
				return nil, nil
			}
			blocked.Add(1)
			defer blocked.Add(-1)
			<-ctx.Done() // a long judge call, cut short by the shutdown
			return nil, ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(context.Background()) }()
	<-r.Running()
	for i := 0; i < n; i++ {
		if err := e.pub.PublishEvents(renderDone(fmt.Sprintf("AC-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Every handler slot busy, and the consumer has handed this instance more messages
	// than its handlers hold: pulled, buffered, not started.
	poll.Until(t, 10*time.Second, "the instance to hold pulled messages beyond its busy handlers", func() (bool, string) {
		info := e.consumer(t, bus.Gater)
		b := blocked.Load()
		return b == 4 && info.NumAckPending > int(b), fmt.Sprintf("%d handlers busy, ack pending %d", b, info.NumAckPending)
	})
	// The server counts a message as delivered when it queues it for this instance; give
	// the queue time to reach the client. One the server still held as the subscription
	// ended would be sent to no one and wait out AckWait: a window of the server's, not
	// something a closing client can hand back.
	time.Sleep(500 * time.Millisecond)
	held := e.consumer(t, bus.Gater).NumAckPending // 4 in handlers, the rest buffered
	closed := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	// A new instance finishes all of them well within AckWait.
	var handled sync.Map
	e.run(t, bus.Gater, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		handled.Store(ev.JobID, true)
		return nil, nil
	})
	// Nothing stays checked out to the closed instance until AckWait runs out.
	poll.Until(t, 9*time.Second, fmt.Sprintf("a new instance to handle every message (the closed one held %d)", held), func() (bool, string) {
		c := 0
		handled.Range(func(any, any) bool { c++; return true })
		return c == n-quick, fmt.Sprintf("%d/%d handled %s after close", c, n-quick, time.Since(closed).Round(time.Millisecond))
	})
}
