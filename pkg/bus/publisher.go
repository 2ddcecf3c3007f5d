package bus

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Metadata keys tribunal sets on Watermill messages. They travel as NATS headers.
const (
	// MetaSubject routes a message: the publisher sends it to this subject and ignores
	// the Watermill topic, because one handler emits several event types.
	MetaSubject = "tribunal_subject"
	// MetaType is the event type, for dead-letter readers that cannot decode the payload.
	MetaType = "tribunal_type"
	// MetaDelivered is the JetStream delivery count of an incoming message.
	MetaDelivered = "tribunal_delivered"
	// MetaStreamSeq is the stream sequence of an incoming message.
	MetaStreamSeq = "tribunal_stream_seq"
	// MetaCorrelation is Watermill's correlation-id key (middleware.CorrelationID).
	MetaCorrelation = "correlation_id"
	// MetaConsumer is the durable consumer an incoming message was delivered by.
	MetaConsumer = "tribunal_consumer"
)

// Publisher publishes Watermill messages to JetStream with the message UUID as
// Nats-Msg-Id, so a handler that runs twice publishes the same ids and the stream drops
// the copies within its duplicate window. Publish returns only after JetStream has
// acknowledged every message: a handler's input is acked after its outputs are stored.
//
// An acknowledgement that says Duplicate is not taken for success on its word: the
// stored message is read back and must be the same event (see checkDuplicate), so a
// message id pre-empted by someone else's message is an error, not a silent loss. The
// one exception is a subject TrustDuplicatesOf names.
type Publisher struct {
	js jetstream.JetStream
	// timeout bounds a whole Publish; attempt bounds the wait for one round of acks (the
	// rounds before it wait less: firstPublishAttempt, doubling).
	timeout, attempt time.Duration
	streams          sync.Map // stream name -> jetstream.Stream, for reading duplicates back
	// trusted are the services whose subjects' duplicates are taken on trust.
	trusted []string
	// payloads makes a duplicate's payload part of its identity (ComparePayloads).
	payloads bool
	// live are the ids of one stream this publisher knows stored there, with their
	// sequences (AlreadyPublished): nil when it keeps none.
	live *liveIDs
}

// PublisherOption tunes NewPublisher.
type PublisherOption func(*Publisher)

// TrustDuplicatesOf makes the publisher take a Duplicate acknowledgement for success,
// without reading the stored message back, when the message is on a subject only the
// named services publish: their output event types (ServiceOutputs) on any tenant and
// their dead letters.
//
// It is for the services whose NATS user may read no stream message (ReadsStream), above
// all the judge, which must stay blind to which artifact is "ours" and would read that
// in any job.submitted it could fetch. Trust there is sound as far as the authorization
// holds: only the service itself may publish on those subjects, every id it publishes is
// derived from the event's type, tenant, batch, job, iteration and step, and every other
// publisher derives its ids with its own types, or is the ingress, which derives a
// team's ids itself and refuses any other, so a Duplicate on such a subject is the
// service's own earlier publish of the same event (a redelivered handler's). What trust
// gives up: a compromised publisher on the account pre-empting one of these ids, or two
// steps of the service deriving one id (a bug), loses an event silently instead of
// failing the publish (docs/security.md, "What is not covered").
func TrustDuplicatesOf(services ...string) PublisherOption {
	return func(p *Publisher) { p.trusted = append(p.trusted, services...) }
}

// ComparePayloads makes a Duplicate acknowledgement a success only when the stored event
// also carries the same payload as the one sent, not just the same identity. It is the
// ingress's: a team's events are rebuilt from its request deterministically, so the
// same id with another payload is a team sending changed content under an id already
// used (a spec edited and sent again, a spot-check answered twice), which was accepted
// with nothing published. The error names the first payload field that differs.
func ComparePayloads() PublisherOption {
	return func(p *Publisher) { p.payloads = true }
}

// ReadsStream reports whether a service's NATS user may read the stream's messages
// (pkg/tenants grants it $JS.API.STREAM.MSG.GET): the aggregator, which is trusted with
// every event. The renderer, the gater and the judge read none and publish with
// TrustDuplicatesOf.
func ReadsStream(service string) bool { return service == Aggregator }

// A round of acks waits firstPublishAttempt, then twice as long each time, up to
// maxPublishAttempt. A stream leader killed mid-publish never answers what was sent to
// it, and its successor is elected in one to two seconds: a short first round has the
// copy reach the new leader soon after (measured on the three-node cluster benchmark,
// a 5 s round made the leader kill's longest pause in verdicts 5.1 s, a 1 s one 1.0 s).
// The copy carries the same message id, so an ack that was only slow costs one
// duplicate the stream drops. The rounds lengthen so that a cluster too loaded to ack
// within a second is not asked again and again.
const (
	firstPublishAttempt = time.Second
	maxPublishAttempt   = 5 * time.Second
)

// PublishTimeout bounds one Publish: its messages are sent again under their ids until
// every one is acknowledged or this much time has passed.
const PublishTimeout = 30 * time.Second

// NewPublisher returns a publisher over js.
func NewPublisher(js jetstream.JetStream, opts ...PublisherOption) *Publisher {
	p := &Publisher{js: js, timeout: PublishTimeout, attempt: maxPublishAttempt}
	for _, o := range opts {
		o(p)
	}
	return p
}

// AlreadyPublished makes the publisher keep its own index of the message ids stored in
// set.Stream, for set.Window after each is stored, starting with set's (ReadPublished: a
// stream's tail, read when a process starts; NewPublished: none): every id this
// publisher gets a PubAck for on that stream is added with its sequence, and a Publish
// of an id the index holds sends nothing and is treated exactly as a Duplicate
// acknowledgement from the server naming the id's stored sequence (read back and
// compared, unless TrustDuplicatesOf covers its subject). The ids of set count for one
// window from now; each id is dropped about one window after it was stored (liveIDs).
//
// It is for a stream only this process publishes to (the all-in-one mode's: its state
// folder is locked), whose server-side duplicate window can then be short. Two things
// need the ids for the whole redelivery horizon (RedeliveryHorizon): a restart, after
// which the server rebuilds its ids only from the messages stored within one window of
// now, so that a handler in flight at a crash, redelivered by a later start, would store
// copies of what it had published; and a handler redelivered in a live process, which
// publishes again what an earlier delivery stored. The server's own index covers the
// same ids at a cost the collector pays on every cycle (a map of pointers to entries
// and an id string per message, about 150 B); this one is pointer-free, 16 bytes of key
// and 8 of sequence per event id. What only the server can cover is a send whose ack
// never came back, resent: LocalDuplicateWindow.
func AlreadyPublished(set *Published) PublisherOption {
	return func(p *Publisher) {
		if set == nil {
			return
		}
		p.live = newLiveIDs(set, time.Now)
	}
}

// known returns the stream and sequence of an id the publisher's index holds.
func (p *Publisher) known(id string) (string, uint64, bool) {
	if p.live == nil {
		return "", 0, false
	}
	seq, ok := p.live.seq(id)
	return p.live.stream, seq, ok
}

// stored adds an acknowledged id to the publisher's index, when it keeps one for the
// acknowledgement's stream.
func (p *Publisher) stored(id string, ack *jetstream.PubAck) {
	if p.live == nil || ack == nil || ack.Stream != p.live.stream || ack.Sequence == 0 {
		return
	}
	p.live.add(id, ack.Sequence)
}

// trusts reports whether a Duplicate on subject is taken on trust (TrustDuplicatesOf).
func (p *Publisher) trusts(subject string) bool {
	for _, svc := range p.trusted {
		if subject == events.DeadLetterSubject(svc) {
			return true
		}
		if _, t, err := events.ParseSubject(subject); err == nil && slices.Contains(ServiceOutputs[svc], t) {
			return true
		}
	}
	return false
}

// Publish implements message.Publisher. topic is used as the subject only when a message
// carries no MetaSubject. Every message is published in a producer span of its own
// (publishSpan), whose context travels as a W3C traceparent header: the creation context
// the consumers' spans continue.
//
// A message whose ack does not come within an attempt, or that finds the stream without
// a leader, is published again under the same id until the whole timeout passes: on a
// cluster that loses the stream's leader, what was sent to it is lost, and the new
// leader stores the copy (or drops it as a duplicate if the first one made it).
func (p *Publisher) Publish(topic string, msgs ...*message.Message) (err error) {
	nms := make([]*nats.Msg, len(msgs))
	spans := make([]trace.Span, 0, len(msgs))
	defer func() {
		// A producer span lasts until the stream has stored its message (or the publish
		// gave up on it: the whole call fails, and every message of it is published again).
		for _, s := range spans {
			if err != nil {
				s.RecordError(err)
				s.SetStatus(codes.Error, err.Error())
			}
			s.End()
		}
	}()
	for i, m := range msgs {
		subject := m.Metadata.Get(MetaSubject)
		if subject == "" {
			subject = topic
		}
		ctx, span := publishSpan(m, subject)
		spans = append(spans, span)
		telemetry.Inject(ctx, m.Metadata)
		nm := &nats.Msg{Subject: subject, Data: m.Payload, Header: nats.Header{}}
		for k, v := range m.Metadata {
			if k == MetaSubject || k == MetaDelivered || k == MetaStreamSeq || k == MetaConsumer {
				continue
			}
			nm.Header.Set(k, v)
		}
		nm.Header.Set(jetstream.MsgIDHeader, m.UUID)
		if err := p.checkSize(m, nm); err != nil {
			return err
		}
		nms[i] = nm
	}
	deadline := time.Now().Add(p.timeout)
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	wait := 100 * time.Millisecond
	attempt := min(firstPublishAttempt, p.attempt)
	for {
		until := time.Now().Add(attempt)
		attempt = min(2*attempt, p.attempt)
		if until.After(deadline) {
			until = deadline
		}
		var err error
		if pending, err = p.publishOnce(msgs, nms, pending, until); err == nil || !IsTransient(err) {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// publishSpan starts the producer span of one message, named by the OpenTelemetry
// messaging conventions "publish tribunal.{tenant}.<type>" (the operation NATS calls
// publish, then the subject's low-cardinality template), as a child of the span the
// message was produced under (the handler's consumer span: the router sets it), or, for
// a message produced under none (a client's submission, a team's through the ingress),
// as the root of a new trace: the submitter's span, recorded by the process that
// publishes. One message is one span, so the span's context is the message's creation
// context, the conventions' PRODUCER "send".
func publishSpan(m *message.Message, subject string) (context.Context, trace.Span) {
	ctx, span := telemetry.StartSpan(m.Context(), spanName("publish", subject), trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(publishAttrs(m, subject)...)
	}
	return ctx, span
}

// publishAttrs are the attributes of a producer span: the messaging conventions' and,
// when the payload is an event (a dead letter's is its original), tribunal's own, so the
// root of a job's trace is found by its tenant, batch and AC like its other spans.
func publishAttrs(m *message.Message, subject string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String("nats"), semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("publish"),
		semconv.MessagingDestinationName(subject), semconv.MessagingMessageID(m.UUID), semconv.MessagingMessageBodySize(len(m.Payload)),
	}
	if tpl := events.SubjectTemplate(subject); tpl != subject {
		attrs = append(attrs, semconv.MessagingDestinationTemplate(tpl))
	}
	if c := m.Metadata.Get(MetaCorrelation); c != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(c))
	}
	if ev, err := events.Decode(m.Payload); err == nil {
		attrs = append(attrs, telemetry.AttrEventID.String(ev.ID), telemetry.AttrEventType.String(string(ev.Type)), telemetry.AttrTenant.String(ev.Tenant),
			telemetry.AttrBatch.String(ev.BatchID), telemetry.AttrJob.String(ev.JobID), telemetry.AttrIteration.Int(ev.Iteration))
	}
	return attrs
}

// publishOnce publishes the messages at pending and waits for their acks until
// deadline. It returns the ones to publish again and the first error; a non-transient
// error ends the publish.
func (p *Publisher) publishOnce(msgs []*message.Message, nms []*nats.Msg, pending []int, deadline time.Time) ([]int, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, 0, len(pending))
	sent := make([]int, 0, len(pending))
	var again []int
	var first error
	for _, i := range pending {
		if stream, seq, ok := p.known(msgs[i].UUID); ok {
			// Stored within the horizon, by this process or before it started: what a
			// Duplicate ack would say.
			err := p.duplicate(ctx, nms[i], &jetstream.PubAck{Stream: stream, Sequence: seq, Duplicate: true})
			if err == nil {
				continue
			}
			if err = fmt.Errorf("publish %s to %s: %w", msgs[i].UUID, nms[i].Subject, err); !IsTransient(err) {
				return nil, err
			}
			if first == nil {
				first = err
			}
			again = append(again, i)
			continue
		}
		f, err := p.js.PublishMsgAsync(nms[i], jetstream.WithMsgID(msgs[i].UUID))
		if err != nil {
			return pending, fmt.Errorf("publish %s to %s: %w", msgs[i].UUID, nms[i].Subject, err)
		}
		futures = append(futures, f)
		sent = append(sent, i)
	}
	for k, f := range futures {
		i := sent[k]
		var err error
		select {
		case ack := <-f.Ok():
			if err = p.duplicate(ctx, f.Msg(), ack); err == nil {
				p.stored(msgs[i].UUID, ack)
				continue
			}
			err = fmt.Errorf("publish %s to %s: %w", msgs[i].UUID, nms[i].Subject, err)
		case err = <-f.Err():
			err = fmt.Errorf("publish %s to %s: %w", msgs[i].UUID, nms[i].Subject, err)
		case <-ctx.Done():
			err = fmt.Errorf("publish %s to %s: no ack: %w", msgs[i].UUID, nms[i].Subject, ctx.Err())
		}
		if !IsTransient(err) {
			return nil, err
		}
		if first == nil {
			first = err
		}
		again = append(again, i)
	}
	return again, first
}

// duplicate checks an acknowledgement: nil unless it says Duplicate and the stored
// message, read back, is not the one sent (a trusted subject is not read back).
func (p *Publisher) duplicate(ctx context.Context, sent *nats.Msg, ack *jetstream.PubAck) error {
	if ack == nil || !ack.Duplicate || p.trusts(sent.Subject) {
		return nil
	}
	return p.checkDuplicate(ctx, sent, ack)
}

// ErrDuplicateMismatch marks a publish whose message id the stream already holds for a
// different message: someone pre-empted the id, or two logical steps derived one id. The
// message was not stored, so reporting success would lose it silently.
var ErrDuplicateMismatch = errclass.New(errclass.Conflict, "message id already used by a different message")

// checkDuplicate reads back the message a Duplicate acknowledgement points at and
// compares it with the one sent: the same subject and, for events, the same identity
// (type, tenant, batch, job and id). Raw bytes are not compared for events: a
// redelivered handler's legitimate republish carries a later time. A payload that is no
// event (a test's, or a dead letter's undecodable original) must match byte for byte.
func (p *Publisher) checkDuplicate(ctx context.Context, sent *nats.Msg, ack *jetstream.PubAck) error {
	st, err := p.stream(ctx, ack.Stream)
	if err != nil {
		return fmt.Errorf("duplicate of seq %d: read it back: %w", ack.Sequence, err)
	}
	stored, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		return fmt.Errorf("duplicate of seq %d: read it back: %w", ack.Sequence, err)
	}
	if what := sameMessage(sent.Subject, sent.Data, stored.Subject, stored.Data, p.payloads); what != "" {
		return fmt.Errorf("%w: the stream holds %s as seq %d on %s (%s); this is %s on %s: %s differs",
			ErrDuplicateMismatch, sent.Header.Get(jetstream.MsgIDHeader), ack.Sequence, stored.Subject, describe(stored.Data), describe(sent.Data), sent.Subject, what)
	}
	return nil
}

// stream returns a handle on a stream, looked up once.
func (p *Publisher) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if st, ok := p.streams.Load(name); ok {
		return st.(jetstream.Stream), nil
	}
	st, err := p.js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	p.streams.Store(name, st)
	return st, nil
}

// sameMessage names what differs between a sent message and a stored one ("" when they
// are the same message); with payloads, an event's payload fields count too.
func sameMessage(subject string, data []byte, storedSubject string, stored []byte, payloads bool) string {
	if subject != storedSubject {
		return "the subject"
	}
	a, errA := events.Decode(data)
	b, errB := events.Decode(stored)
	switch {
	case errA != nil && errB != nil:
		if !bytes.Equal(data, stored) {
			return "the payload"
		}
		return ""
	case errA != nil || errB != nil:
		return "the payload"
	}
	for _, f := range []struct{ name, a, b string }{
		{"the id", a.ID, b.ID}, {"the type", string(a.Type), string(b.Type)}, {"the tenant", a.Tenant, b.Tenant},
		{"the batch", a.BatchID, b.BatchID}, {"the job", a.JobID, b.JobID},
	} {
		if f.a != f.b {
			return f.name
		}
	}
	if payloads {
		if field := payloadDiff(a.Payload, b.Payload); field != "" {
			return "the payload's " + field
		}
	}
	return ""
}

// payloadDiff names the first field, as the wire names it ("spec.criterion"), in which
// two payloads differ; "" when they are equal.
func payloadDiff(a, b events.Payload) string {
	tree := func(p events.Payload) any {
		data, err := msgpack.Marshal(p)
		if err != nil {
			return nil
		}
		var v any
		if msgpack.Unmarshal(data, &v) != nil {
			return nil
		}
		return v
	}
	return firstDiff("", tree(a), tree(b))
}

func firstDiff(path string, a, b any) string {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return cmp.Or(path, "the value")
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, dup := x[k]; !dup {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if d := firstDiff(join(k), x[k], y[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return cmp.Or(path, "the value")
		}
		for i := range x {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return cmp.Or(path, "the value")
	}
	return ""
}

// describe names a message's event for an error: its type, id, tenant, batch and job.
func describe(data []byte) string {
	ev, err := events.Decode(data)
	if err != nil {
		return fmt.Sprintf("%d bytes that are no event", len(data))
	}
	return fmt.Sprintf("%s %s of %s/%s/%s", ev.Type, ev.ID, ev.Tenant, ev.BatchID, ev.JobID)
}

// Close implements message.Publisher.
func (p *Publisher) Close() error { return nil }

// MaxPayload is the largest message the connection's server takes (headers included),
// 0 before the connection has learnt it. A client checks what it will publish against it
// before publishing anything.
func (p *Publisher) MaxPayload() int64 { return p.js.Conn().MaxPayload() }

// ErrPayloadTooLarge marks an event whose encoded size is over the server's max payload
// (1 MiB unless the server is configured otherwise). Publishing it can never succeed, so
// IsPermanent reports it: the input that produced it goes to dead letters at once
// instead of being redelivered, and its handler (a paid provider call) run again.
var ErrPayloadTooLarge = errclass.New(errclass.Refused, "event larger than the NATS server's max payload")

// jsErrMessageTooLarge is JetStream's "message size exceeds maximum allowed" (a stream's
// max_msg_size), which no retry cures either.
const jsErrMessageTooLarge jetstream.ErrorCode = 10054

// checkSize refuses a message the connection's server would refuse, before it is sent,
// with an error naming the event type and the sizes. NATS counts headers and payload
// against the limit; the subject is not part of it.
func (p *Publisher) checkSize(m *message.Message, nm *nats.Msg) error {
	limit := p.js.Conn().MaxPayload()
	if limit <= 0 {
		return nil // not connected yet: the client checks again when it sends
	}
	if size := int64(nm.Size() - len(nm.Subject)); size > limit {
		return fmt.Errorf("publish %s %s to %s: %d bytes with headers, over the limit of %d: %w",
			cmp.Or(m.Metadata.Get(MetaType), "message"), m.UUID, nm.Subject, size, limit, ErrPayloadTooLarge)
	}
	return nil
}

// tooLarge reports a publish error no retry can cure: the message is over the server's
// max payload or the stream's max message size.
func tooLarge(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, ErrPayloadTooLarge) || errors.Is(err, nats.ErrMaxPayload) ||
		(errors.As(err, &api) && api.ErrorCode == jsErrMessageTooLarge)
}

// PublishEvents encodes and publishes events, waiting for every ack.
func (p *Publisher) PublishEvents(evs ...events.Event) error {
	msgs, err := Messages(evs...)
	if err != nil {
		return err
	}
	return p.Publish("", msgs...)
}

// Messages encodes events as Watermill messages routed to their subjects.
func Messages(evs ...events.Event) ([]*message.Message, error) {
	msgs := make([]*message.Message, 0, len(evs))
	for _, e := range evs {
		data, err := events.Encode(e)
		if err != nil {
			return nil, err
		}
		subject, err := events.Subject(e.Tenant, e.Type)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		m := message.NewMessage(e.ID, data)
		m.Metadata.Set(MetaSubject, subject)
		m.Metadata.Set(MetaType, string(e.Type))
		m.Metadata.Set(MetaCorrelation, e.CorrelationID)
		msgs = append(msgs, m)
	}
	return msgs, nil
}
