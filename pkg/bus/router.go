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
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
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
// decode, an output too large for the server (ErrPayloadTooLarge), or an error marked
// with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || events.IsDecodeError(err) || tooLarge(err)
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
	// original payload. A dead letter is never dead-lettered again: one its handler fails
	// on for the moment is handed back and handled again, and only one it fails on for
	// good (Permanent) is logged and dropped.
	DeadLetters func(ctx context.Context, dl DeadLetter) ([]events.Event, error)
	// Chain gives every output the input's digest chain followed by the input's own link
	// (events.ChainOf over the input's wire bytes), so the aggregator's decision chains
	// every stage it rests on. The stages between a render request and a decision set it;
	// the aggregator does not: it chains its inputs in the job record, and its own events
	// start no chain (a rubric loop's next render would otherwise carry all the earlier
	// ones).
	Chain  bool
	Logger *slog.Logger
}

// The in-process retries of a failed handler (RouterConfig's defaults): two more
// attempts, 100 ms then 200 ms apart, doubling up to 2 s.
const (
	defaultMaxRetries   = 2
	defaultRetryInitial = 100 * time.Millisecond
	defaultRetryMax     = 2 * time.Second
)

// NewRouter wires handler into a Watermill router reading the service's durable consumer
// through sub and publishing through pub. Middleware, outermost first: dead letters
// (permanent or exhausted failures are published to tribunal._dlq.<service> with the
// original payload and the reason, then acked), exhaustion marking, tracing (one span per
// delivery, continuing the trace carried in the message's metadata), metrics (handled and
// failed per event type, latency), publishing of the handler's outputs, retry with
// backoff, correlation ids, and panic recovery. Tracing and metrics sit outside the
// retries, so one delivery is one span and one count however many in-process attempts it
// took. The outputs are published inside the chain rather than by Watermill after it, so
// a publish failure is a failed delivery like any other: it counts toward MaxDeliver and
// ends in a dead letter, and one that can never succeed (an output over the server's max
// payload) goes there at once, instead of the input being redelivered, and its handler
// re-run, forever.
func NewRouter(cfg RouterConfig, sub message.Subscriber, pub message.Publisher, handler Handler) (*message.Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = defaultMaxRetries
	}
	if cfg.RetryInitial == 0 {
		cfg.RetryInitial = defaultRetryInitial
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = defaultRetryMax
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = Config{}.withDefaults().MaxDeliver
	}
	logger := telemetry.WithContext(cfg.Logger).With("service", cfg.Service)
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
		tracing(cfg.Service),
		metrics(cfg.Service),
		publishing(pub, logger),
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
	// The publishing middleware has sent the outputs by the time the chain returns, so
	// Watermill itself never has any to publish.
	r.AddHandler(cfg.Service, cfg.Service, sub, "events", pub, adapt(cfg.Service, handler, cfg.DeadLetters, cfg.Chain, logger))
	return r, nil
}

// publishing publishes the messages a handler produced, under the delivery's span
// context, and fails the delivery when they are not all stored. It returns no messages,
// so the router has nothing left to publish after the middleware chain.
func publishing(pub message.Publisher, logger *slog.Logger) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err != nil || len(out) == 0 {
				return nil, err
			}
			for _, m := range out {
				m.SetContext(msg.Context())
			}
			if err := pub.Publish("", out...); err != nil {
				if isDeadLetter(msg) && IsPermanent(err) {
					// Dead letters are not dead-lettered again (see exhausted).
					logger.ErrorContext(msg.Context(), "outputs of a dead letter cannot be published", "msg_id", msg.UUID, "err", err)
					return nil, nil
				}
				return nil, fmt.Errorf("outputs of %s: %w", msg.UUID, err)
			}
			return nil, nil
		}
	}
}

func isDeadLetter(msg *message.Message) bool {
	return strings.HasPrefix(msg.Metadata.Get(MetaSubject), events.DeadLetterPrefix+".")
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
			// A dead letter is never dead-lettered again: its handler only records a
			// blocked job, and a copy of a copy would circle back to it.
			if err != nil && !IsPermanent(err) && !isDeadLetter(msg) {
				if n, _ := strconv.Atoi(msg.Metadata.Get(MetaDelivered)); n >= maxDeliver {
					return out, Permanent(fmt.Errorf("gave up after %d deliveries: %w", n, err))
				}
			}
			return out, err
		}
	}
}

// DeadLetterType is the event type label of the aggregator's dead-letter input in
// metrics and spans.
const DeadLetterType = "dead_letter"

// messageType names a message's event type for metrics and spans. It is read from the
// subject, which ParseSubject checks against the known types, never from a header a
// publisher chose, so the label set stays bounded.
func messageType(msg *message.Message) string {
	subj := msg.Metadata.Get(MetaSubject)
	if strings.HasPrefix(subj, events.DeadLetterPrefix+".") {
		return DeadLetterType
	}
	if _, typ, err := events.ParseSubject(subj); err == nil {
		return string(typ)
	}
	return "unknown"
}

// tracing runs each delivery in a consumer span named by the OpenTelemetry messaging
// conventions, "process tribunal.{tenant}.<type>" (the operation, then the subject's
// low-cardinality template; "process tribunal._dlq.<service>" for dead letters), whose
// parent is the producer span in the message's metadata (telemetry.Extract: none, and
// this span is the root of its trace), and gives that context to the handler and to
// every message it produces: the publisher's producer spans for them are children of
// this span, so the next service continues the same trace. The span links to the
// message's creation context as the conventions ask, and carries their messaging
// attributes (a "process" operation on NATS, the subject as destination, the durable as
// consumer group, the event id as message id) and the service's name, which tells the
// services of the all-in-one apart. The incoming message keeps the span context too, so
// a dead letter continues the trace.
func tracing(service string) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			typ := messageType(msg)
			subject := msg.Metadata.Get(MetaSubject)
			ctx := telemetry.Extract(msg.Context(), msg.Metadata)
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
			if creation := trace.SpanContextFromContext(ctx); creation.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: creation}))
			}
			ctx, span := telemetry.StartSpan(ctx, spanName("process", subject), opts...)
			if span.IsRecording() {
				// Only a recording span gets its attributes: without an exporter, building
				// them was 4 % of the bytes a 10,000-AC all-in-one run allocated. The SDK
				// tribunal sets up samples by the parent, never by start attributes.
				span.SetAttributes(deliveryAttrs(msg, service, typ, subject)...)
			}
			defer span.End()
			msg.SetContext(ctx)
			out, err := h(msg)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			for _, m := range out {
				m.SetContext(ctx)
			}
			return out, err
		}
	}
}

// spanNames caches the span name of each operation and subject: the subjects are
// bounded (types times tenants), and a name is asked for at every delivery and publish.
var spanNames sync.Map

// spanName is the messaging conventions' span name of operation on subject:
// "{operation} {destination template}".
func spanName(operation, subject string) string {
	key := operation + " " + subject
	if n, ok := spanNames.Load(key); ok {
		return n.(string)
	}
	n := operation + " " + events.SubjectTemplate(subject)
	spanNames.Store(key, n)
	return n
}

// deliveryAttrs are the span attributes of one delivery.
func deliveryAttrs(msg *message.Message, service, typ, subject string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		telemetry.AttrService.String(service), telemetry.AttrEventType.String(typ), telemetry.AttrEventID.String(msg.UUID),
		semconv.MessagingSystemKey.String("nats"), semconv.MessagingDestinationName(subject),
		semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"),
		semconv.MessagingMessageID(msg.UUID), semconv.MessagingMessageBodySize(len(msg.Payload)),
	}
	if tpl := events.SubjectTemplate(subject); tpl != subject {
		attrs = append(attrs, semconv.MessagingDestinationTemplate(tpl))
	}
	if c := msg.Metadata.Get(MetaConsumer); c != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(c))
	}
	if c := msg.Metadata.Get(MetaCorrelation); c != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(c))
	}
	if tenant, _, err := events.ParseSubject(subject); err == nil {
		attrs = append(attrs, telemetry.AttrTenant.String(tenant))
	}
	if n, err := strconv.Atoi(msg.Metadata.Get(MetaDelivered)); err == nil {
		attrs = append(attrs, telemetry.AttrDelivered.Int(n))
	}
	return attrs
}

// metrics counts each delivery as handled or failed by event type and tenant (the
// subject's, bounded by telemetry's configured tenants) and observes how long it took.
// A delivery interrupted by a shutdown is neither: it goes back uncounted.
func metrics(service string) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			start := time.Now()
			out, err := h(msg)
			if err == nil || msg.Context().Err() == nil {
				tenant, _, _ := events.ParseSubject(msg.Metadata.Get(MetaSubject))
				telemetry.Handled(service, messageType(msg), tenant, time.Since(start), err)
			}
			return out, err
		}
	}
}

// withEvent puts the event's identity on the handler's span and in its context, where
// a telemetry.ContextHandler adds it to every line logged with that context.
func withEvent(ctx context.Context, ev events.Event) context.Context {
	trace.SpanFromContext(ctx).SetAttributes(telemetry.AttrTenant.String(ev.Tenant), telemetry.AttrBatch.String(ev.BatchID),
		telemetry.AttrJob.String(ev.JobID), telemetry.AttrIteration.Int(ev.Iteration))
	return telemetry.WithEvent(ctx, telemetry.Event{Tenant: ev.Tenant, Batch: ev.BatchID, Job: ev.JobID, Type: string(ev.Type), ID: ev.ID})
}

// DeadLetter is a message a service gave up on, as the dead-letter subject holds it.
type DeadLetter struct {
	// Payload is the original event's bytes.
	Payload []byte
	// Service gave up on it, for Reason.
	Service, Reason string
	// Subject is the subject the original event was published on.
	Subject string
}

func adapt(service string, h Handler, deadLetters func(context.Context, DeadLetter) ([]events.Event, error), chain bool, logger *slog.Logger) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		if isDeadLetter(msg) {
			subj := msg.Metadata.Get(MetaSubject)
			if deadLetters != nil {
				ctx := msg.Context()
				if ev, err := events.Decode(msg.Payload); err == nil {
					ctx = withEvent(ctx, ev)
					// Where the dead letter is, and its event's chain (the header
					// travels with the payload).
					seq, chainSeqs := messagePosition(msg, len(ev.Chain))
					ctx = WithPosition(ctx, seq, chainSeqs)
				}
				service := strings.TrimPrefix(subj, events.DeadLetterPrefix+".")
				// The dead letter's bytes are the original event's: chain them like any input.
				out, err := deadLetters(WithPayloadDigest(ctx, msg.Payload), DeadLetter{Payload: msg.Payload, Service: service,
					Reason: msg.Metadata.Get(MetaReason), Subject: msg.Metadata.Get(MetaOriginalSubject)})
				if err != nil {
					if msg.Context().Err() != nil || !IsPermanent(err) {
						// Handed back and handled again (a dead letter is never
						// dead-lettered again, see exhausted): it is its job's last
						// input, and for a job recorded final the one that announces its
						// outcome and its batch's completion again. Dropping it on a
						// store that did not answer for the moment lost them for good.
						return nil, fmt.Errorf("dead letter %s: %w", msg.UUID, err)
					}
					logger.ErrorContext(ctx, "dead letter not recorded", "subject", subj, "msg_id", msg.UUID, "err", err)
					return nil, nil
				}
				logger.DebugContext(ctx, "dead letter handled", "from", service, "outputs", len(out))
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
			// event claiming another tenant or type than its subject is refused (and
			// counted), never handled.
			var oe *events.OriginError
			if err := events.CheckOrigin(subj, ev.Tenant, ev.Type); errors.As(err, &oe) {
				telemetry.Refused(service, oe.Reason)
				return nil, Permanent(fmt.Errorf("event %s refused: %w", ev.ID, err))
			}
		}
		seq, chainSeqs := messagePosition(msg, len(ev.Chain))
		ctx := WithPosition(WithPayloadDigest(withEvent(msg.Context(), ev), msg.Payload), seq, chainSeqs)
		out, err := h(ctx, ev)
		if err != nil {
			logger.DebugContext(ctx, "event handler failed", "err", err)
			return nil, fmt.Errorf("handle %s %s (%s/%s/%s): %w", ev.Type, ev.ID, ev.Tenant, ev.BatchID, ev.JobID, err)
		}
		if chain {
			for i := range out {
				out[i].Chain = events.ChainOf(ev.Envelope, PayloadDigest(ctx))
			}
		}
		logger.DebugContext(ctx, "event handled", "outputs", len(out))
		msgs, err := Messages(out...)
		if chain && err == nil {
			chainOutputs(msgs, seq, chainSeqs, len(ev.Chain))
		}
		return msgs, err
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
		// A reason quoting a long error must not make the dead letter itself too large
		// to publish: the input would then be redelivered and handled again forever.
		c.Metadata.Set(MetaReason, clipReason(m.Metadata.Get(MetaReason)))
		// The handler's span context: the aggregator's handling of the dead letter
		// continues the job's trace under the span that gave up.
		c.SetContext(m.Context())
		d.logger.ErrorContext(m.Context(), "message sent to dead letters", "subject", topic, "msg_id", m.UUID,
			"original_subject", m.Metadata.Get(MetaSubject), "reason", m.Metadata.Get(MetaReason))
		out = append(out, c)
	}
	if err := d.pub.Publish(topic, out...); err != nil {
		return err
	}
	telemetry.DeadLettered(d.service, len(out))
	return nil
}

func (d deadLetterPublisher) Close() error { return nil }

// maxReason bounds a dead letter's reason header.
const maxReason = 4096

func clipReason(s string) string {
	if len(s) <= maxReason {
		return s
	}
	return strings.ToValidUTF8(s[:maxReason], "") + "…"
}

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
