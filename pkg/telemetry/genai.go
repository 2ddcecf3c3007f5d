package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// AttrGenAISystem is gen_ai.system, the provider attribute of the GenAI conventions
// before gen_ai.provider.name replaced it. Both are set: trace backends and dashboards
// built on the older conventions still group by it.
const AttrGenAISystem = attribute.Key("gen_ai.system")

// AttrJudgeKind is the judge kind a provider call was made for.
const AttrJudgeKind = attribute.Key("tribunal.judge.kind")

// ProviderCall describes one call to an LLM provider, as the GenAI semantic conventions
// describe a chat completion's request.
type ProviderCall struct {
	// Provider is the provider kind as verdicts record it ("openai", "scripted").
	Provider string
	// Model is the requested model (the provider's default when the request named none).
	Model string
	// Kind is the judge kind the call serves ("ab", "critic", ..., "runner").
	Kind string
	// ServerAddress and ServerPort name the endpoint, when the provider has one.
	ServerAddress string
	ServerPort    int
	// Temperature, MaxTokens and Seed are the sampling parameters sent (nil or 0: none).
	Temperature *float64
	MaxTokens   int
	Seed        *int
	// Structured says the answer was asked for as JSON.
	Structured bool
}

// ProviderResult is how a provider call ended.
type ProviderResult struct {
	// Model is the model that answered, as the provider reported it.
	Model                     string
	InputTokens, OutputTokens int
	// Outcome is "ok" or a short failure class ("rate_limited", "unavailable",
	// "canceled", "error"): the outcome label of the call metrics and, on failure, the
	// span's error.type.
	Outcome string
	// Err is the failure, recorded on the span.
	Err error
}

// StartProviderCall opens a GenAI client span for one provider call ("chat <model>",
// gen_ai.* attributes per the OpenTelemetry GenAI conventions) as a child of the span in
// ctx, the handler's span, and returns the context to make the call under (the
// provider's retries add events to this span) and the function that ends it. Ending
// records the response model, token usage and outcome on the span and the call's
// duration and outcome in the provider metrics, labelled with the tenant of the event
// being handled.
func StartProviderCall(ctx context.Context, c ProviderCall) (context.Context, func(ProviderResult)) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(c.Provider),
		AttrGenAISystem.String(c.Provider),
		semconv.GenAIRequestModelKey.String(c.Model),
		AttrJudgeKind.String(c.Kind),
	}
	if c.ServerAddress != "" {
		attrs = append(attrs, semconv.ServerAddressKey.String(c.ServerAddress))
		if c.ServerPort > 0 {
			attrs = append(attrs, semconv.ServerPortKey.Int(c.ServerPort))
		}
	}
	if c.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperatureKey.Float64(*c.Temperature))
	}
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokensKey.Int(c.MaxTokens))
	}
	if c.Seed != nil {
		attrs = append(attrs, semconv.GenAIRequestSeedKey.Int(*c.Seed))
	}
	if c.Structured {
		attrs = append(attrs, semconv.GenAIOutputTypeJSON)
	}
	// The event being handled: a call's span is found by its AC like the handler's.
	ev, hasEv := EventFrom(ctx)
	if hasEv {
		attrs = append(attrs, AttrTenant.String(ev.Tenant), AttrBatch.String(ev.Batch), AttrJob.String(ev.Job))
	}
	ctx, span := StartSpan(ctx, "chat "+c.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	start := time.Now()
	return ctx, func(r ProviderResult) {
		if r.Outcome == "" {
			r.Outcome = "ok"
		}
		if r.Model != "" {
			span.SetAttributes(semconv.GenAIResponseModelKey.String(r.Model))
		}
		span.SetAttributes(semconv.GenAIUsageInputTokensKey.Int(r.InputTokens), semconv.GenAIUsageOutputTokensKey.Int(r.OutputTokens))
		if r.Outcome != "ok" {
			span.SetAttributes(semconv.ErrorTypeKey.String(r.Outcome))
			if r.Err != nil {
				span.RecordError(r.Err)
				span.SetStatus(codes.Error, r.Err.Error())
			} else {
				span.SetStatus(codes.Error, r.Outcome)
			}
		}
		span.End()
		m := Default()
		m.ProviderSeconds.WithLabelValues(c.Provider, c.Model, c.Kind, r.Outcome).Observe(time.Since(start).Seconds())
		m.ProviderCalls.WithLabelValues(c.Provider, c.Model, m.TenantLabel(ev.Tenant), r.Outcome).Inc()
	}
}

// Retry reasons for ProviderRetry.
const (
	RetryRateLimited = "rate_limited"
	RetryServerError = "server_error"
	RetryTimeout     = "timeout"
	RetryNetwork     = "network"
	RetryEmpty       = "empty"
)

// ProviderRetry records that a provider is about to repeat a failed attempt: a count
// by reason and an event on the call's span with the HTTP status (0: none arrived),
// the attempt that failed and the wait before the next.
func ProviderRetry(ctx context.Context, provider, model, reason string, status, attempt int, wait time.Duration) {
	Default().ProviderRetries.WithLabelValues(provider, model, reason).Inc()
	trace.SpanFromContext(ctx).AddEvent("retry", trace.WithAttributes(
		attribute.String("reason", reason), semconv.HTTPResponseStatusCodeKey.Int(status),
		attribute.Int("attempt", attempt), attribute.Float64("wait_seconds", wait.Seconds())))
}

// ProviderRateLimited records an HTTP 429 answer from a provider, whether or not it is
// retried.
func ProviderRateLimited(provider, model string) {
	Default().ProviderRateLimited.WithLabelValues(provider, model).Inc()
}
