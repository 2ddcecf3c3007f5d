package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Handler is a service's business logic for one event. It returns the events it derives;
// the router publishes them (waiting for JetStream's acks) before acknowledging the input,
// so an input is never acked without its outputs stored. Handlers must be idempotent:
// deterministic event ids make republishing harmless.
type Handler func(ctx context.Context, ev events.Event) ([]events.Event, error)

// permanentError marks a failure that no retry can cure.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the message goes straight to dead letters.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err can never succeed on retry: a message that does not
// decode, or an error marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || events.IsDecodeError(err)
}

// RouterConfig configures a service's Watermill router.
type RouterConfig struct {
	Service string
	// MaxRetries is the in-process retry count before the message is handed back to
	// JetStream for a delayed redelivery.
	MaxRetries int
	// RetryInitial and RetryMax shape the in-process backoff.
	RetryInitial, RetryMax time.Duration
	// MaxDeliver must match the consumer's: at the last delivery a failing message goes
	// to the dead-letter subject instead of being dropped by the server.
	MaxDeliver int
	// CloseTimeout bounds how long shutdown waits for in-flight handlers.
	CloseTimeout time.Duration
	// DeadLetters, when set, receives the dead letters of every service (the consumer
	// must include DeadLetterPrefix+".>"): the aggregator turns them into blocked jobs so
	// no AC waits forever for an event that was given up on. It is called with the
	// original payload; its errors are logged and never dead-lettered again.
	DeadLetters func(ctx context.Context, payload []byte, reason, service string) ([]events.Event, error)
	Logger      *slog.Logger
}

// NewRouter wires handler into a Watermill router reading the service's durable consumer
// through sub and publishing through pub. Middleware, outermost first: dead letters
// (permanent or exhausted failures are published to tribunal._dlq.<service> with the
// original payload and the reason, then acked), exhaustion marking, retry with backoff,
// correlation ids, and panic recovery.
func NewRouter(cfg RouterConfig, sub message.Subscriber, pub message.Publisher, handler Handler) (*message.Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.RetryInitial == 0 {
		cfg.RetryInitial = 100 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 2 * time.Second
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = Config{}.withDefaults().MaxDeliver
	}
	logger := cfg.Logger.With("service", cfg.Service)
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.CloseTimeout}, watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug}))
	if err != nil {
		return nil, fmt.Errorf("router for %s: %w", cfg.Service, err)
	}
	dlq, err := middleware.PoisonQueueWithFilter(deadLetterPublisher{pub: pub, service: cfg.Service, logger: logger}, events.DeadLetterSubject(cfg.Service), IsPermanent)
	if err != nil {
		return nil, fmt.Errorf("dead-letter middleware for %s: %w", cfg.Service, err)
	}
	r.AddMiddleware(
		dlq,
		exhausted(cfg.MaxDeliver),
		middleware.Retry{
			MaxRetries:      cfg.MaxRetries,
			InitialInterval: cfg.RetryInitial,
			MaxInterval:     cfg.RetryMax,
			Multiplier:      2,
			ShouldRetry:     func(p middleware.RetryParams) bool { return !IsPermanent(p.Err) },
			// A retried handler is routine (a later stage overtaking a submission on
			// another worker); only dead letters are errors.
			Logger: watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{slog.LevelError: slog.LevelInfo}),
		}.Middleware,
		middleware.CorrelationID,
		middleware.Recoverer,
	)
	r.AddHandler(cfg.Service, cfg.Service, sub, "events", pub, adapt(handler, cfg.DeadLetters, logger))
	return r, nil
}

// exhausted turns the error of a message's last allowed delivery into a permanent one,
// so the dead-letter middleware keeps it instead of the server silently giving up.
func exhausted(maxDeliver int) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err != nil && msg.Context().Err() != nil {
				// Interrupted by a shutdown, not failed: hand it back uncounted.
				return out, err
			}
			if err != nil && !IsPermanent(err) {
				if n, _ := strconv.Atoi(msg.Metadata.Get(MetaDelivered)); n >= maxDeliver {
					return out, Permanent(fmt.Errorf("gave up after %d deliveries: %w", n, err))
				}
			}
			return out, err
		}
	}
}

func adapt(h Handler, deadLetters func(context.Context, []byte, string, string) ([]events.Event, error), logger *slog.Logger) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		if subj := msg.Metadata.Get(MetaSubject); strings.HasPrefix(subj, events.DeadLetterPrefix+".") {
			if deadLetters != nil {
				service := strings.TrimPrefix(subj, events.DeadLetterPrefix+".")
				out, err := deadLetters(msg.Context(), msg.Payload, msg.Metadata.Get(MetaReason), service)
				if err != nil {
					if msg.Context().Err() != nil {
						return nil, err
					}
					logger.Error("dead letter not recorded", "subject", subj, "msg_id", msg.UUID, "err", err)
					return nil, nil
				}
				return Messages(out...)
			}
			return nil, nil
		}
		ev, err := events.Decode(msg.Payload)
		if err != nil {
			logger.Warn("undecodable event", "msg_id", msg.UUID, "subject", msg.Metadata.Get(MetaSubject), "err", err)
			return nil, err
		}
		if subj := msg.Metadata.Get(MetaSubject); subj != "" {
			// The subject is the routing truth and the unit of tenant permissions: an
			// event claiming another tenant than its subject is refused.
			tenant, typ, perr := events.ParseSubject(subj)
			if perr == nil && (tenant != ev.Tenant || typ != ev.Type) {
				return nil, Permanent(fmt.Errorf("event %s on subject %s claims tenant %q type %q", ev.ID, subj, ev.Tenant, ev.Type))
			}
		}
		out, err := h(WithPayloadDigest(msg.Context(), msg.Payload), ev)
		if err != nil {
			return nil, fmt.Errorf("handle %s %s (%s/%s/%s): %w", ev.Type, ev.ID, ev.Tenant, ev.BatchID, ev.JobID, err)
		}
		return Messages(out...)
	}
}

// deadLetterPublisher republishes a poisoned message to the service's dead-letter
// subject under a new message id (the original id would be dropped as a duplicate of
// the original event) while keeping the original payload byte for byte.
type deadLetterPublisher struct {
	pub     message.Publisher
	service string
	logger  *slog.Logger
}

// Metadata keys on a dead letter.
const (
	MetaOriginalSubject = "tribunal_original_subject"
	MetaOriginalID      = "tribunal_original_id"
	MetaReason          = middleware.ReasonForPoisonedKey
)

func (d deadLetterPublisher) Publish(topic string, msgs ...*message.Message) error {
	out := make([]*message.Message, 0, len(msgs))
	for _, m := range msgs {
		c := message.NewMessage("dlq-"+d.service+"-"+m.UUID, m.Payload)
		for k, v := range m.Metadata {
			c.Metadata.Set(k, v)
		}
		c.Metadata.Set(MetaOriginalSubject, m.Metadata.Get(MetaSubject))
		c.Metadata.Set(MetaOriginalID, m.UUID)
		c.Metadata.Set(MetaSubject, topic)
		d.logger.Error("message sent to dead letters", "subject", topic, "msg_id", m.UUID,
			"original_subject", m.Metadata.Get(MetaSubject), "reason", m.Metadata.Get(MetaReason))
		out = append(out, c)
	}
	return d.pub.Publish(topic, out...)
}

func (d deadLetterPublisher) Close() error { return nil }

type payloadDigestKey struct{}

// WithPayloadDigest records the SHA-256 of the event bytes being handled, so a handler
// can chain exactly what it derived its decision from (see PayloadDigest).
func WithPayloadDigest(ctx context.Context, payload []byte) context.Context {
	sum := sha256.Sum256(payload)
	return context.WithValue(ctx, payloadDigestKey{}, hex.EncodeToString(sum[:]))
}

// PayloadDigest is the SHA-256 of the wire bytes of the event being handled, or "" when
// the handler was called directly.
func PayloadDigest(ctx context.Context) string {
	d, _ := ctx.Value(payloadDigestKey{}).(string)
	return d
}
