package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Event is the identity of the event a handler is working on, as logs carry it.
type Event struct {
	Tenant, Batch, Job, Type, ID string
}

type eventKey struct{}

// WithEvent records the event being handled in ctx, so that every line logged with ctx
// through a ContextHandler names its tenant, batch and job without each call site
// repeating them.
func WithEvent(ctx context.Context, ev Event) context.Context {
	return context.WithValue(ctx, eventKey{}, ev)
}

// EventFrom returns the event recorded by WithEvent.
func EventFrom(ctx context.Context) (Event, bool) {
	ev, ok := ctx.Value(eventKey{}).(Event)
	return ev, ok
}

// ContextHandler adds to every record logged with a context the event recorded by
// WithEvent (tenant, batch, job, event_type, event_id) and the current trace_id and
// span_id, so a log line can be joined to its AC and its trace. An attribute the call
// already sets is not repeated.
type ContextHandler struct {
	inner slog.Handler
}

// NewContextHandler wraps h; wrapping a ContextHandler again returns it unchanged.
func NewContextHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(ContextHandler); ok {
		return h
	}
	return ContextHandler{inner: h}
}

// WithContext returns l logging through a ContextHandler.
func WithContext(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(ContextHandler); ok {
		return l
	}
	return slog.New(NewContextHandler(l.Handler()))
}

// Enabled implements slog.Handler.
func (h ContextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	ev, hasEv := EventFrom(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if !hasEv && !sc.IsValid() {
		return h.inner.Handle(ctx, r)
	}
	present := map[string]bool{}
	r.Attrs(func(a slog.Attr) bool {
		present[a.Key] = true
		return true
	})
	add := func(k, v string) {
		if v != "" && !present[k] {
			r.AddAttrs(slog.String(k, v))
		}
	}
	if hasEv {
		add("tenant", ev.Tenant)
		add("batch", ev.Batch)
		add("job", ev.Job)
		add("event_type", ev.Type)
		add("event_id", ev.ID)
	}
	if sc.IsValid() {
		add("trace_id", sc.TraceID().String())
		add("span_id", sc.SpanID().String())
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h ContextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ContextHandler{inner: h.inner.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h ContextHandler) WithGroup(name string) slog.Handler {
	return ContextHandler{inner: h.inner.WithGroup(name)}
}
