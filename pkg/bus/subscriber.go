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
	Logger          *slog.Logger
}

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
		cfg.NakBase = 500 * time.Millisecond
	}
	if cfg.NakMax <= 0 {
		cfg.NakMax = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Subscriber{js: js, cfg: cfg, closed: make(chan struct{})}
}

// Subscribe implements message.Subscriber. topic is a service name.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	cons, err := s.js.Consumer(ctx, s.cfg.Stream, ConsumerName(topic))
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s (run provisioning first): %w", ConsumerName(topic), err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(s.cfg.Concurrency))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", ConsumerName(topic), err)
	}
	s.mu.Lock()
	s.subs = append(s.subs, iter)
	s.mu.Unlock()

	out := make(chan *message.Message)
	slots := make(chan struct{}, s.cfg.Concurrency)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		var inflight sync.WaitGroup
		defer inflight.Wait()
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			case <-s.closed:
				nakBuffered(iter)
				return
			}
			if s.isClosed() {
				nakBuffered(iter)
				return
			}
			jm, err := iter.Next()
			if err != nil {
				<-slots
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				s.cfg.Logger.Warn("consumer read failed", "consumer", ConsumerName(topic), "err", err)
				select {
				case <-time.After(200 * time.Millisecond):
				case <-s.closed:
					return
				}
				continue
			}
			if s.isClosed() {
				// Shutting down: hand the message back at once instead of letting it wait
				// out its ack deadline.
				_ = jm.Nak()
				<-slots
				continue
			}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-slots }()
				s.deliver(ctx, topic, jm, out)
			}()
		}
	}()
	return out, nil
}

// nakBuffered hands back every message a draining iterator still holds, so another
// instance gets them at once.
func nakBuffered(iter jetstream.MessagesContext) {
	for {
		jm, err := iter.Next(jetstream.NextMaxWait(50 * time.Millisecond))
		if err != nil {
			return
		}
		_ = jm.Nak()
	}
}

func (s *Subscriber) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// deliver hands one JetStream message to the router and settles it with the server once
// the handler acks or nacks.
func (s *Subscriber) deliver(ctx context.Context, topic string, jm jetstream.Msg, out chan<- *message.Message) {
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
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msg.SetContext(hctx)

	select {
	case out <- msg:
	case <-s.closed:
		_ = jm.Nak()
		return
	case <-ctx.Done():
		_ = jm.Nak()
		return
	}

	// Keep the message ours while the handler works (LLM calls can outlast AckWait).
	tick := time.NewTicker(s.cfg.AckWait / 3)
	defer tick.Stop()
	for {
		select {
		case <-msg.Acked():
			actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := jm.DoubleAck(actx)
			acancel()
			if err != nil {
				// The work is done and its outputs are published; a lost ack means a
				// redelivery that the idempotent handler absorbs.
				s.cfg.Logger.Warn("ack not confirmed", "msg_id", id, "err", err)
			}
			return
		case <-msg.Nacked():
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
