package events

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/bounds"
)

// wire is the msgpack form of an event. Field names are short and stable; the payload
// is nested raw so the envelope can be checked (version first) before the body is read.
type wire struct {
	V             int                `msgpack:"v"`
	ID            string             `msgpack:"id"`
	Type          Type               `msgpack:"type"`
	Tenant        string             `msgpack:"tenant"`
	BatchID       string             `msgpack:"batch"`
	JobID         string             `msgpack:"job,omitempty"`
	Iteration     int                `msgpack:"iter"`
	Time          time.Time          `msgpack:"time"`
	CausationID   string             `msgpack:"cause,omitempty"`
	CorrelationID string             `msgpack:"corr,omitempty"`
	Attempt       int                `msgpack:"attempt,omitempty"`
	Rejudge       string             `msgpack:"rejudge,omitempty"`
	Chain         []string           `msgpack:"chain,omitempty"`
	Data          msgpack.RawMessage `msgpack:"data"`
}

// Encode validates e and returns its wire bytes. Encoding an invalid event is a bug in
// the caller, so it is refused here rather than discovered by every consumer.
func Encode(e Event) ([]byte, error) {
	if e.Payload == nil {
		return nil, missing("payload")
	}
	if e.Type == "" {
		e.Type = e.Payload.EventType()
	}
	if e.Type != e.Payload.EventType() {
		return nil, invalid("envelope.type", fmt.Sprintf("envelope says %q, payload is %q", e.Type, e.Payload.EventType()))
	}
	if e.SchemaVersion == 0 {
		e.SchemaVersion = SchemaVersion
	}
	if err := e.Envelope.Validate(); err != nil {
		return nil, withType(e.Type, err)
	}
	if err := e.Payload.Validate(); err != nil {
		return nil, withType(e.Type, err)
	}
	data := getBuf()
	defer putBuf(data)
	if err := marshalInto(data, e.Payload); err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", e.Type, err)
	}
	w := wire{
		V: e.SchemaVersion, ID: e.ID, Type: e.Type, Tenant: e.Tenant, BatchID: e.BatchID,
		JobID: e.JobID, Iteration: e.Iteration, Time: e.Time, CausationID: e.CausationID,
		CorrelationID: e.CorrelationID, Attempt: e.Attempt, Rejudge: e.Rejudge, Chain: e.Chain, Data: data.Bytes(),
	}
	out := getBuf()
	defer putBuf(out)
	if err := marshalInto(out, &w); err != nil {
		return nil, fmt.Errorf("encode %s envelope: %w", e.Type, err)
	}
	return bytes.Clone(out.Bytes()), nil
}

// bufPool holds the buffers events are encoded into. Each event is encoded twice (the
// payload, then the envelope around it), and growing a fresh buffer for each pass was 6 %
// of all bytes a 10,000-AC run allocated.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer { return bufPool.Get().(*bytes.Buffer) }

// putBuf keeps buffers of ordinary events only: one grown by a rare large event would
// otherwise stay allocated for as long as the pool keeps it.
func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		b.Reset()
		bufPool.Put(b)
	}
}

// marshalInto is msgpack.Marshal writing into buf.
func marshalInto(buf *bytes.Buffer, v any) error {
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	return enc.Encode(v)
}

// Decode parses and validates wire bytes. Every failure is a *FieldError wrapping
// ErrMalformed, ErrUnknownVersion, ErrUnknownType, ErrMissingField or ErrInvalidField
// and naming the field.
//
// The bytes are walked first (bounds.Msgpack with bounds.Event): a header claiming more
// elements than follow, or nesting or counts beyond any event's, is refused as malformed
// before the msgpack decoder allocates for it.
func Decode(data []byte) (Event, error) {
	if err := bounds.Msgpack(data, bounds.Event); err != nil {
		field := "envelope"
		var be *bounds.Error
		if errors.As(err, &be) && be.Path != "" {
			field = be.Path // the wire's names: "data.cases[2]", "chain"
		}
		return Event{}, &FieldError{Doc: docEvent, Field: field, Reason: err.Error(), Err: ErrMalformed}
	}
	var w wire
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(data)) // unknown fields allowed: Reset clears every flag
	if err := dec.Decode(&w); err != nil {
		return Event{}, &FieldError{Doc: docEvent, Field: "envelope", Reason: err.Error(), Err: ErrMalformed}
	}
	if w.V == 0 {
		return Event{}, withType(w.Type, missing("envelope.v"))
	}
	if w.V != SchemaVersion {
		return Event{}, &FieldError{Doc: docOf(w.Type), Field: "envelope.v", Reason: fmt.Sprintf("got %d, this build reads %d", w.V, SchemaVersion), Err: ErrUnknownVersion}
	}
	env := Envelope{
		ID: w.ID, Type: w.Type, SchemaVersion: w.V, Tenant: w.Tenant, BatchID: w.BatchID,
		JobID: w.JobID, Iteration: w.Iteration, Time: w.Time, CausationID: w.CausationID,
		CorrelationID: w.CorrelationID, Attempt: w.Attempt, Rejudge: w.Rejudge, Chain: w.Chain,
	}
	if err := env.Validate(); err != nil {
		return Event{}, withType(w.Type, err)
	}
	p, err := newPayload(w.Type)
	if err != nil {
		return Event{}, err
	}
	if len(w.Data) == 0 {
		return Event{}, withType(w.Type, missing("data"))
	}
	if err := msgpack.Unmarshal(w.Data, p); err != nil {
		return Event{}, &FieldError{Doc: docOf(w.Type), Field: "data", Reason: err.Error(), Err: ErrMalformed}
	}
	if err := p.Validate(); err != nil {
		return Event{}, withType(w.Type, err)
	}
	return Event{Envelope: env, Payload: p}, nil
}

// IsDecodeError reports whether err came from Decode rejecting the bytes (as opposed to
// an infrastructure failure): such a message can never succeed and goes to dead letters.
func IsDecodeError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}
