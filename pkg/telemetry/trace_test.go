package telemetry

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracer keeps its tracer between calls, and still follows a provider set later.
func TestTracerFollowsTheGlobalProvider(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	otel.SetTracerProvider(noop.NewTracerProvider())
	_, span := Tracer().Start(t.Context(), "before")
	span.End()
	if span.SpanContext().IsValid() {
		t.Fatal("the no-op provider's span has a valid context")
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	otel.SetTracerProvider(tp)
	for range 2 {
		_, span := Tracer().Start(t.Context(), "after")
		span.End()
	}
	if got := len(exp.GetSpans()); got != 2 {
		t.Fatalf("the provider set later recorded %d spans, want 2", got)
	}
}
