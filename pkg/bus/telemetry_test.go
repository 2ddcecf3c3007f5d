package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// onlySpan waits for the single span named name.
func onlySpan(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	poll.Until(t, 5*time.Second, "span "+name, func() (bool, string) {
		found = found[:0]
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				found = append(found, s)
			}
		}
		return len(found) > 0, fmt.Sprintf("%d spans", len(exp.GetSpans()))
	})
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(found), name)
	}
	return found[0]
}

// traceparent splits a W3C traceparent header into trace and span ids.
func traceparent(t *testing.T, h string) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(h, "-")
	if len(parts) != 4 || parts[0] != "00" {
		t.Fatalf("traceparent %q", h)
	}
	return parts[1], parts[2]
}

// gateOne runs a gater that turns every render.done into a gates.failed, publishes one
// render.done of job (under the span context in ctx, none for a submitter that records
// no span) and returns the environment, that input and the headers of the event the
// gater produced.
func gateOne(t *testing.T, ctx context.Context, job string) (*routerEnv, events.Event, nats.Header) {
	t.Helper()
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 3})
	e.run(t, bus.Gater, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		return []events.Event{events.New(&events.GatesFailed{Kind: events.KindAB, ACID: ev.JobID, Blocked: "missing artifact"},
			ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
	})
	rd := renderDone(job)
	msgs, err := bus.Messages(rd)
	if err != nil {
		t.Fatal(err)
	}
	msgs[0].SetContext(ctx)
	if err := e.pub.Publish("", msgs...); err != nil {
		t.Fatal(err)
	}
	out, _ := events.Subject(testTenant, events.TypeGatesFailed)
	poll.Until(t, 10*time.Second, "the produced event", func() (bool, string) {
		n := natstest.SubjectCount(t, e.js, out)
		return n == 1, fmt.Sprintf("%d on %s", n, out)
	})
	st, err := e.js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctxT(t), out)
	if err != nil {
		t.Fatal(err)
	}
	return e, rd, msg.Header
}

// spanAttrs are a span's attributes as strings.
func spanAttrs(s tracetest.SpanStub) map[string]string {
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	return attrs
}

// TestRouterTracesAndCountsHandledEvents: an event published by a submitter with no span
// of its own is published in a producer span that roots its trace ("publish
// tribunal.{tenant}.render.done", recorded by the publishing process); the gater handles
// it in a consumer span ("process ...") under that producer span and linked to it, and
// publishes its output in a producer span under its own, whose context the output
// carries as its traceparent header; the delivery is counted as handled once.
func TestRouterTracesAndCountsHandledEvents(t *testing.T) {
	m := telemetry.Reset()
	exp := otlpsink.RecordGlobal(t)
	e, rd, produced := gateOne(t, context.Background(), "AC-1")
	poll.Until(t, 10*time.Second, "the input to be settled", e.settled(t, bus.Gater))

	root := onlySpan(t, exp, "publish tribunal.{tenant}.render.done")
	span := onlySpan(t, exp, "process tribunal.{tenant}.render.done")
	out := onlySpan(t, exp, "publish tribunal.{tenant}.gates.failed")
	if root.Parent.IsValid() || root.SpanKind != trace.SpanKindProducer {
		t.Errorf("the submission's span: parent %v, kind %v, want a recorded root of kind producer", root.Parent, root.SpanKind)
	}
	if span.SpanContext.TraceID() != root.SpanContext.TraceID() || span.Parent.SpanID() != root.SpanContext.SpanID() || span.SpanKind != trace.SpanKindConsumer {
		t.Errorf("consumer span in trace %s under %s (kind %v), want under the producer span %s/%s",
			span.SpanContext.TraceID(), span.Parent.SpanID(), span.SpanKind, root.SpanContext.TraceID(), root.SpanContext.SpanID())
	}
	if len(span.Links) != 1 || span.Links[0].SpanContext.SpanID() != root.SpanContext.SpanID() {
		t.Errorf("consumer span links %v, want the message's creation context", span.Links)
	}
	if out.Parent.SpanID() != span.SpanContext.SpanID() || out.SpanKind != trace.SpanKindProducer {
		t.Errorf("the output's producer span under %s (kind %v), want under the consumer span %s", out.Parent.SpanID(), out.SpanKind, span.SpanContext.SpanID())
	}
	subject, _ := events.Subject(testTenant, events.TypeRenderDone)
	for name, want := range map[string]map[string]string{
		"consumer": {"tribunal.tenant": testTenant, "tribunal.batch": "batch-1", "tribunal.job": "AC-1", "tribunal.event.id": rd.ID,
			"tribunal.event.type": "render.done", "messaging.operation.type": "process", "messaging.operation.name": "process",
			"messaging.destination.name": subject, "messaging.destination.template": "tribunal.{tenant}.render.done", "messaging.system": "nats"},
		"producer": {"tribunal.tenant": testTenant, "tribunal.batch": "batch-1", "tribunal.job": "AC-1", "messaging.operation.type": "send",
			"messaging.operation.name": "publish", "messaging.destination.name": subject, "messaging.destination.template": "tribunal.{tenant}.render.done",
			"messaging.message.id": rd.ID, "messaging.message.conversation_id": rd.CorrelationID},
	} {
		s := span
		if name == "producer" {
			s = root
		}
		attrs := spanAttrs(s)
		for k, v := range want {
			if attrs[k] != v {
				t.Errorf("%s span attribute %s = %q, want %q", name, k, attrs[k], v)
			}
		}
	}

	tid, sid := traceparent(t, produced.Get("traceparent"))
	if tid != out.SpanContext.TraceID().String() || sid != out.SpanContext.SpanID().String() {
		t.Errorf("produced event carries %s/%s, want its producer span %s/%s", tid, sid, out.SpanContext.TraceID(), out.SpanContext.SpanID())
	}

	if got := m.Value("tribunal_events_handled_total", "service=gater", "type=render.done"); got != 1 {
		t.Errorf("handled %v, want 1", got)
	}
	if got := m.Value("tribunal_events_failed_total"); got != 0 {
		t.Errorf("failed %v, want 0", got)
	}
	if got := m.Value("tribunal_handler_seconds", "service=gater"); got != 1 {
		t.Errorf("latency observations %v, want 1", got)
	}
}

// TestDeadLetterCountedAndTraced: a message that can never succeed is counted as failed
// and as a dead letter, and the dead letter continues the trace under the span that gave
// up on it, so the aggregator's handling of it joins the job's trace.
func TestDeadLetterCountedAndTraced(t *testing.T) {
	m := telemetry.Reset()
	exp := otlpsink.RecordGlobal(t)
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 3})
	e.run(t, bus.Gater, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		return nil, bus.Permanent(errors.New("this input can never work"))
	})
	rd := renderDone("AC-2")
	if err := e.pub.PublishEvents(rd); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a dead letter", func() (bool, string) {
		n := natstest.SubjectCount(t, e.js, events.DeadLetterSubject(bus.Gater))
		return n == 1, fmt.Sprintf("%d dead letters", n)
	})
	poll.Until(t, 10*time.Second, "the input to be settled", e.settled(t, bus.Gater))

	span := onlySpan(t, exp, "process tribunal.{tenant}.render.done")
	if span.Status.Code != codes.Error {
		t.Errorf("span status %v, want an error", span.Status)
	}
	pub := onlySpan(t, exp, "publish tribunal._dlq.gater")
	if pub.Parent.SpanID() != span.SpanContext.SpanID() {
		t.Errorf("the dead letter's producer span is under %s, want the span that gave up %s", pub.Parent.SpanID(), span.SpanContext.SpanID())
	}
	dl := deadLetters(t, e.js, bus.Gater)[0]
	tid, sid := traceparent(t, dl.Header.Get("traceparent"))
	if tid != span.SpanContext.TraceID().String() || sid != pub.SpanContext.SpanID().String() {
		t.Errorf("dead letter carries %s/%s, want its producer span %s/%s, under the span that gave up", tid, sid, span.SpanContext.TraceID(), pub.SpanContext.SpanID())
	}
	if got := m.Value("tribunal_dead_letters_total", "service=gater"); got != 1 {
		t.Errorf("dead letters %v, want 1", got)
	}
	if got := m.Value("tribunal_events_failed_total", "service=gater", "type=render.done"); got != 1 {
		t.Errorf("failed %v, want 1", got)
	}
	if got := m.Value("tribunal_events_handled_total"); got != 0 {
		t.Errorf("handled %v, want 0", got)
	}
}

// TestSpanIDsAdvanceWithoutSDK: with no tracer provider installed (no exporter
// configured), the event a handler produces still carries a span id of this process's
// own in the trace it received (the producer span's, under the handler's), not the span
// id it received, so a backend fed by only some of the services links each span to the
// one that really produced its input. An input that carried no trace gives an output
// that carries none: no trace is invented that no process records a root of.
func TestSpanIDsAdvanceWithoutSDK(t *testing.T) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	m := telemetry.Reset()
	m.SetTenants([]string{testTenant})
	upstream := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	_, _, produced := gateOne(t, trace.ContextWithRemoteSpanContext(context.Background(), upstream), "AC-3")
	tid, sid := traceparent(t, produced.Get("traceparent"))
	if tid != upstream.TraceID().String() {
		t.Errorf("produced event in trace %s, want the upstream's %s", tid, upstream.TraceID())
	}
	if sid == upstream.SpanID().String() {
		t.Errorf("produced event carries the span id upstream published under (%s): no span of this process's own", sid)
	}
	poll.Until(t, 10*time.Second, "the input to be counted", func() (bool, string) {
		got := m.Value("tribunal_events_handled_total", "service=gater", "type=render.done", "tenant="+testTenant)
		return got == 1, fmt.Sprintf("handled %v", got)
	})
	if _, _, produced := gateOne(t, context.Background(), "AC-4"); produced.Get("traceparent") != "" {
		t.Errorf("an input without a trace gave an output with traceparent %q", produced.Get("traceparent"))
	}
}

// TestRouterRefusesEnvelopeItsSubjectContradicts: an event whose envelope names another
// tenant or type than the subject it arrived on is never handed to the handler; it goes
// to dead letters at once and is counted as refused, by service and reason.
func TestRouterRefusesEnvelopeItsSubjectContradicts(t *testing.T) {
	m := telemetry.Reset()
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 3})
	var handled atomic.Int32
	e.run(t, bus.Gater, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		handled.Add(1)
		return nil, nil
	})
	own, _ := events.Subject(testTenant, events.TypeRenderDone)
	// team-b's render.done on team-a's subject.
	other := renderDone("AC-1")
	other.Tenant = "team-b"
	other.ID = events.NewID(other.Type, other.Tenant, other.BatchID, other.JobID, 0, "")
	// A gates.failed envelope on the render.done subject.
	gd := events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-2", Blocked: "x"}, testTenant, "batch-1", "AC-2", 0, "", nil)
	for _, ev := range []events.Event{other, gd} {
		data, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.Publish(ctxT(t), own, data, jetstream.WithMsgID(ev.ID)); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "both refused into dead letters", func() (bool, string) {
		n := natstest.SubjectCount(t, e.js, events.DeadLetterSubject(bus.Gater))
		return n == 2, fmt.Sprintf("%d dead letters", n)
	})
	poll.Until(t, 10*time.Second, "the inputs to be settled", e.settled(t, bus.Gater))
	if n := handled.Load(); n != 0 {
		t.Errorf("the handler ran %d times on events their subject contradicts", n)
	}
	for _, reason := range []string{events.OriginTenant, events.OriginType} {
		if got := m.Value("tribunal_refusals_total", "service=gater", "reason="+reason); got != 1 {
			t.Errorf("refusals with reason %s: %v, want 1", reason, got)
		}
	}
}
