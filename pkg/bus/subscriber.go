package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SubscriberConfig tunes one service instance's consumption.
type SubscriberConfig struct {
	// Stream is the stream the durable consumers live on.
	Stream string
	// Concurrency bounds the messages this instance handles at once: backpressure. The
	// consumer's MaxAckPending bounds all instances together.
	Concurrency int
	// AckWait must match the consumer's; handlers running longer call InProgress every
	// third of it so the server does not redeliver a message that is still being worked.
	AckWait time.Duration
	// NakBase and NakMax shape the redelivery delay of a failed message: base doubled per
	// delivery, capped at max.
	NakBase, NakMax time.Duration
	// Tenants, when set, binds one durable per tenant (see ConsumerNames) and caps each
	// tenant's messages in flight at TenantQuota (default half of Concurrency), so every
	// tenant keeps a share of this instance whatever the others queue up.
	Tenants     []string
	TenantQuota int
	// ShutdownGrace is how long handlers in flight keep their context once the
	// subscriber is closed (or its context ends): their calls finish and their results
	// are published and acked. Only then are the ones still running cancelled and their
	// messages handed back. 0 means DefaultShutdownGrace; a negative value cancels them
	// at once.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
}

// A failed delivery is handed back for redelivery after NakBase (500 ms), doubled per
// delivery up to NakMax (30 s): SubscriberConfig's defaults.
const (
	defaultNakBase = 500 * time.Millisecond
	defaultNakMax  = 30 * time.Second
)

// DefaultShutdownGrace fits inside Kubernetes' default terminationGracePeriodSeconds
// (30 s), leaving time to hand back what could not finish before the SIGKILL.
const DefaultShutdownGrace = 25 * time.Second

// pullHeartbeat is how often the server confirms a pull request while it has nothing to
// deliver. When a cluster loses the server leading a consumer, its pull requests die
// with it; two missed heartbeats tell the client, which pulls again from the new leader.
// The client's default (half the 30 s expiry) would stall every service for half a
// minute after a node loss, and 2 s still held the aggregator for 4 s after a leader
// kill on the cluster benchmark; a heartbeat a second costs each idle pull one small
// message a second.
const pullHeartbeat = time.Second

// Subscriber adapts a pre-provisioned durable pull consumer to Watermill. The Watermill
// topic is the service name; the subscriber binds to that service's durable and never
// creates or deletes it, so scaling instances down cannot remove a consumer.
type Subscriber struct {
	js     jetstream.JetStream
	cfg    SubscriberConfig
	mu     sync.Mutex
	subs   []jetstream.MessagesContext
	closed chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// NewSubscriber returns a subscriber over js.
func NewSubscriber(js jetstream.JetStream, cfg SubscriberConfig) *Subscriber {
	if cfg.Stream == "" {
		cfg.Stream = Config{}.withDefaults().Stream
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = Config{}.withDefaults().AckWait
	}
	if cfg.NakBase <= 0 {
		cfg.NakBase = defaultNakBase
	}
	if cfg.NakMax <= 0 {
		cfg.NakMax = defaultNakMax
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Subscriber{js: js, cfg: cfg, closed: make(chan struct{})}
}

// Subscribe implements message.Subscriber. topic is a service name.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	names := ConsumerNames(topic, s.cfg.Tenants)
	quota := s.cfg.Concurrency
	if len(names) > 1 {
		quota = s.cfg.TenantQuota
		if quota <= 0 {
			quota = max(1, s.cfg.Concurrency/2)
		}
	}
	var iters []jetstream.MessagesContext
	for _, name := range names {
		cons, err := s.js.Consumer(ctx, s.cfg.Stream, name)
		if err != nil {
			return nil, fmt.Errorf("bind consumer %s (run provisioning first): %w", name, err)
		}
		iter, err := cons.Messages(jetstream.PullMaxMessages(quota), jetstream.PullHeartbeat(pullHeartbeat))
		if err != nil {
			return nil, fmt.Errorf("consume %s: %w", name, err)
		}
		iters = append(iters, iter)
	}
	s.mu.Lock()
	s.subs = append(s.subs, iters...)
	s.mu.Unlock()

	out := make(chan *message.Message)
	global := make(chan struct{}, s.cfg.Concurrency)
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var loops, pulling sync.WaitGroup
	// drained closes once every loop has stopped pulling (after a Close, once its
	// iterator's drain ended): see nakWhenDrained.
	drained := make(chan struct{})
	pulling.Add(len(iters))
	go func() { pulling.Wait(); close(drained) }()
	for i, iter := range iters {
		loops.Add(1)
		go func() {
			defer loops.Done()
			s.consume(ctx, work, topic, names[i], iter, make(chan struct{}, quota), global, out, pulling.Done, drained)
		}()
	}
	done := make(chan struct{})
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		loops.Wait()
		close(done)
		close(out)
	}()
	go func() {
		defer s.wg.Done()
		defer stopWork()
		s.graceAfterShutdown(ctx, done)
	}()
	return out, nil
}

// graceAfterShutdown returns once the handlers in flight have settled, or once the
// shutdown grace has passed after the subscriber was closed or ctx ended, whichever
// comes first; its caller then cancels the handlers still running.
func (s *Subscriber) graceAfterShutdown(ctx context.Context, done <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-s.closed:
	case <-done:
		return
	}
	if s.cfg.ShutdownGrace < 0 {
		return
	}
	t := time.NewTimer(s.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-t.C:
		s.cfg.Logger.Warn("shutdown grace over: cancelling the handlers still running", "grace", s.cfg.ShutdownGrace)
	case <-done:
	}
}

// consume pulls from one durable while it has a slot of its own (its tenant's quota)
// and one of the instance's. It stops pulling when ctx ends; handlers run under work,
// which outlives ctx by the shutdown grace.
func (s *Subscriber) consume(ctx, work context.Context, topic, name string, iter jetstream.MessagesContext, slots, global chan struct{}, out chan<- *message.Message, stopped func(), drained <-chan struct{}) {
	var inflight sync.WaitGroup
	defer inflight.Wait()
	defer stopped() // before waiting for the deliveries, which may wait for drained
	release := func() { <-global; <-slots }
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		case <-s.closed:
			nakBuffered(iter)
			return
		}
		select {
		case global <- struct{}{}:
		case <-ctx.Done():
			<-slots
			return
		case <-s.closed:
			<-slots
			nakBuffered(iter)
			return
		}
		if s.isClosed() {
			release()
			nakBuffered(iter)
			return
		}
		jm, err := iter.Next()
		if err != nil {
			release()
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			s.cfg.Logger.Warn("consumer read failed", "consumer", name, "err", err)
			select {
			case <-time.After(200 * time.Millisecond):
			case <-s.closed:
				return
			}
			continue
		}
		if s.isClosed() {
			// Shutting down: hand the message back, with the rest the iterator holds,
			// instead of letting it wait out its ack deadline.
			release()
			nakBuffered(iter, jm)
			return
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer release()
			s.deliver(ctx, work, topic, name, jm, out, drained)
		}()
	}
}

// nakBuffered hands back every message a draining iterator still holds, so another
// instance gets them at once. It waits for the drain to end (the iterator closes) rather
// than for a quiet moment: a message still on its way from the server when the drain
// began arrives late on a loaded machine, and one left unread waits out its ack deadline.
// The naks go once the drain has ended, not as the messages come: a message handed back
// while this instance's pull requests are still open comes straight back to it, and one
// the server sends just as the subscription ends is lost until its ack deadline.
func nakBuffered(iter jetstream.MessagesContext, held ...jetstream.Msg) {
	defer func() {
		for _, jm := range held {
			_ = jm.Nak()
		}
	}()
	deadline := time.Now().Add(drainBound)
	for time.Now().Before(deadline) {
		jm, err := iter.Next(jetstream.NextMaxWait(100 * time.Millisecond))
		if errors.Is(err, nats.ErrTimeout) {
			continue
		}
		if err != nil {
			return
		}
		held = append(held, jm)
	}
}

// nakWhenDrained hands back a message a shutdown cut short once this subscriber's
// iterators have stopped pulling (drained, bounded by drainBound), for the reason
// nakBuffered gives.
func nakWhenDrained(jm jetstream.Msg, drained <-chan struct{}) {
	t := time.NewTimer(drainBound)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
	_ = jm.Nak()
}

// drainBound is how long a closing subscriber waits for its iterators' drains: past it,
// what is left is redelivered after its ack deadline instead.
const drainBound = 5 * time.Second

func (s *Subscriber) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// deliver hands one JetStream message to the router and settles it with the server once
// the handler acks or nacks. The handler's context derives from work, not ctx, so a
// shutdown does not cut short a call already under way (see ShutdownGrace).
func (s *Subscriber) deliver(ctx, work context.Context, topic, consumer string, jm jetstream.Msg, out chan<- *message.Message, drained <-chan struct{}) {
	md, err := jm.Metadata()
	if err != nil {
		s.cfg.Logger.Error("message without metadata, terminating it", "consumer", ConsumerName(topic), "err", err)
		_ = jm.Term()
		return
	}
	id := jm.Headers().Get("Nats-Msg-Id")
	if id == "" {
		// A message published without an id (a foreign publisher): name it by position.
		id = "seq-" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	msg := message.NewMessage(id, jm.Data())
	for k, v := range jm.Headers() {
		if len(v) > 0 && k != "Nats-Msg-Id" {
			msg.Metadata.Set(k, v[0])
		}
	}
	msg.Metadata.Set(MetaSubject, jm.Subject())
	msg.Metadata.Set(MetaDelivered, strconv.FormatUint(md.NumDelivered, 10))
	msg.Metadata.Set(MetaStreamSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	msg.Metadata.Set(MetaConsumer, consumer)
	hctx, cancel := context.WithCancel(work)
	defer cancel()
	msg.SetContext(hctx)

	select {
	case out <- msg:
	case <-s.closed:
		nakWhenDrained(jm, drained)
		return
	case <-ctx.Done():
		nakWhenDrained(jm, drained)
		return
	}

	// Keep the message ours while the handler works (LLM calls can outlast AckWait).
	tick := time.NewTicker(s.cfg.AckWait / 3)
	defer tick.Stop()
	for {
		select {
		case <-msg.Acked():
			// The outputs are stored by now, so the ack is not waited for: a lost one
			// means a redelivery that the idempotent handler absorbs, and confirming
			// each would cost a round trip per delivery.
			if err := jm.Ack(); err != nil {
				s.cfg.Logger.Warn("ack not sent", "msg_id", id, "err", err)
			}
			return
		case <-msg.Nacked():
			if hctx.Err() != nil {
				// Cut short by a shutdown: another instance may take it at once.
				nakWhenDrained(jm, drained)
				return
			}
			_ = jm.NakWithDelay(s.nakDelay(md.NumDelivered))
			return
		case <-tick.C:
			_ = jm.InProgress()
		}
	}
}

func (s *Subscriber) nakDelay(delivered uint64) time.Duration {
	d := s.cfg.NakBase
	for i := uint64(1); i < delivered && d < s.cfg.NakMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.NakMax)
}

// Close implements message.Subscriber: it stops pulling, returns messages that were
// pulled but not yet handled, and waits for in-flight handlers to settle theirs.
func (s *Subscriber) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.mu.Lock()
		for _, it := range s.subs {
			// Drain, not Stop: Stop drops the messages already pulled into the buffer
			// without a nak, leaving them with this instance until AckWait runs out.
			it.Drain()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	return nil
}
