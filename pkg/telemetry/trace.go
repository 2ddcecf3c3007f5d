package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of tribunal's spans.
const TracerName = "github.com/tribunal-dev/tribunal"

// Span attribute keys tribunal sets on every handler span, so a trace backend can find
// every span of one tenant, batch or AC.
const (
	AttrTenant    = attribute.Key("tribunal.tenant")
	AttrBatch     = attribute.Key("tribunal.batch")
	AttrJob       = attribute.Key("tribunal.job")
	AttrIteration = attribute.Key("tribunal.iteration")
	AttrEventID   = attribute.Key("tribunal.event.id")
	AttrEventType = attribute.Key("tribunal.event.type")
	AttrService   = attribute.Key("tribunal.service")
	AttrDelivered = attribute.Key("tribunal.delivered")
)

// propagator is W3C trace context and nothing else, fixed rather than taken from the
// global propagator (a no-op until a process sets one): the traceparent header is part of
// tribunal's wire contract between its own services, not a deployment choice.
var propagator = propagation.TraceContext{}

// Tracer is tribunal's tracer from the globally registered provider, so that a provider
// set after start (or per test) takes effect. Without a provider spans are not recorded,
// but span contexts still propagate: trace ids in logs and headers stay consistent even
// when nothing exports them.
//
// The tracer is kept until the global provider changes: asking the provider for it takes
// a lock and a map lookup, 1.4 % of the all-in-one mode's CPU at one span per delivery.
func Tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if c := lastTracer.Load(); c != nil && c.provider == tp {
		return c.tracer
	}
	t := tp.Tracer(TracerName)
	lastTracer.Store(&providerTracer{provider: tp, tracer: t})
	return t
}

// providerTracer is a tracer and the provider it came from. Providers are compared as
// interface values: every OpenTelemetry provider is a pointer or an empty struct.
type providerTracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
}

var lastTracer atomic.Pointer[providerTracer]

// Extract returns ctx with the remote parent found in md, the metadata of an incoming
// message (its NATS headers): the producer span of the service or client that published
// it. A message without one (from a publisher that records no span) leaves ctx as it
// is, so the span started under it is the root of a trace of its own, recorded here:
// no trace hangs off a parent that no process records.
func Extract(ctx context.Context, md map[string]string) context.Context {
	if ectx := propagator.Extract(ctx, propagation.MapCarrier(md)); trace.SpanContextFromContext(ectx).IsRemote() {
		return ectx
	}
	return ctx
}

// StartSpan starts a span named name under the span context in ctx, like Tracer().Start,
// and guarantees the returned context a span id of its own. The OpenTelemetry API without
// an SDK (no exporter configured) hands back the parent's span context unchanged, so every
// service would pass the same span id along and a backend fed by some of the services
// would link their spans to the wrong parent; here such a span gets a fresh span id in
// the parent's trace, carried on by Inject like a recorded one.
func StartSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	ctx, span := Tracer().Start(ctx, name, opts...)
	sc := span.SpanContext()
	if !parent.IsValid() || (sc.IsValid() && sc.SpanID() != parent.SpanID()) {
		return ctx, span
	}
	own := trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: newSpanID(),
		TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()})
	ctx = trace.ContextWithSpanContext(ctx, own)
	return ctx, trace.SpanFromContext(ctx)
}

// newSpanID is a random, non-zero span id.
func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// Inject writes the span context of ctx into md, the metadata of an outgoing message, so
// the next service continues the trace. A context without a span leaves md as it is.
func Inject(ctx context.Context, md map[string]string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.MapCarrier(md))
}
