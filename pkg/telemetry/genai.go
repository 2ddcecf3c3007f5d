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
	// NoModel says the provider answers from recordings (the scripted judge) and asks no
	// model: the call is no GenAI client span but an internal one without gen_ai.*
	// attributes, so GenAI views count only real model calls. Its metrics are kept.
	NoModel bool
	// Mode is the judge mode of the call: ModeDirect ("" too) or ModeBatch (through the
	// provider's batch API, answered when the provider batch ends).
	Mode string
}

// Judge modes of a provider call (ProviderCall.Mode).
const (
	ModeDirect = "direct"
	ModeBatch  = "batch"
)

// AttrJudgeMode is the judge mode a provider call was made in (direct or batch).
const AttrJudgeMode = attribute.Key("tribunal.judge.mode")

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
	// ID is the completion's id as the provider reported it; FinishReasons why the model
	// stopped, per choice.
	ID            string
	FinishReasons []string
	// MaxTokens and Seed are the limit and seed the provider actually sent (its default
	// token limit when the request set none; 0 and nil: none sent). They override the
	// request's on the span: the conventions' gen_ai.request.* is what was sent.
	MaxTokens int
	Seed      *int
	// Priced says CostUSD is the call's cost at the price table's prices (false: the
	// model has no price).
	Priced  bool
	CostUSD float64
}

// Attributes of a call to a provider that asks no model (ProviderCall.NoModel).
const (
	AttrJudgeProvider = attribute.Key("tribunal.judge.provider")
	AttrJudgeModel    = attribute.Key("tribunal.judge.model")
)

// StartProviderCall opens a GenAI client span for one provider call ("chat <model>",
// gen_ai.* attributes per the OpenTelemetry GenAI conventions) as a child of the span in
// ctx, the handler's span, and returns the context to make the call under (the
// provider's retries add events to this span) and the function that ends it. Ending
// records the response's id, model, finish reasons and token usage, the token limit and
// seed sent, and the outcome on the span, and the call's duration and outcome in the
// provider metrics, labelled with the tenant of the event being handled. A call that
// asks no model (NoModel) is an internal span "recorded <kind>" instead, with tribunal's
// own attributes only, and the same metrics.
func StartProviderCall(ctx context.Context, c ProviderCall) (context.Context, func(ProviderResult)) {
	if c.NoModel {
		return startRecordedCall(ctx, c)
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(c.Provider),
		AttrGenAISystem.String(c.Provider),
		semconv.GenAIRequestModelKey.String(c.Model),
		AttrJudgeKind.String(c.Kind),
		AttrJudgeMode.String(c.mode()),
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
		if r.Model != "" {
			span.SetAttributes(semconv.GenAIResponseModelKey.String(r.Model))
		}
		if r.ID != "" {
			span.SetAttributes(semconv.GenAIResponseID(r.ID))
		}
		if len(r.FinishReasons) > 0 {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(r.FinishReasons...))
		}
		if r.MaxTokens > 0 {
			span.SetAttributes(semconv.GenAIRequestMaxTokensKey.Int(r.MaxTokens))
		}
		if r.Seed != nil {
			span.SetAttributes(semconv.GenAIRequestSeedKey.Int(*r.Seed))
		}
		span.SetAttributes(semconv.GenAIUsageInputTokensKey.Int(r.InputTokens), semconv.GenAIUsageOutputTokensKey.Int(r.OutputTokens))
		endCall(span, c, ev.Tenant, start, r)
	}
}

// startRecordedCall is StartProviderCall for a provider that asks no model.
func startRecordedCall(ctx context.Context, c ProviderCall) (context.Context, func(ProviderResult)) {
	attrs := []attribute.KeyValue{AttrJudgeProvider.String(c.Provider), AttrJudgeModel.String(c.Model), AttrJudgeKind.String(c.Kind)}
	ev, hasEv := EventFrom(ctx)
	if hasEv {
		attrs = append(attrs, AttrTenant.String(ev.Tenant), AttrBatch.String(ev.Batch), AttrJob.String(ev.Job))
	}
	ctx, span := StartSpan(ctx, "recorded "+c.Kind, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	start := time.Now()
	return ctx, func(r ProviderResult) { endCall(span, c, ev.Tenant, start, r) }
}

// endCall ends a provider call's span with its outcome and measures the call.
func endCall(span trace.Span, c ProviderCall, tenant string, start time.Time, r ProviderResult) {
	if r.Outcome == "" {
		r.Outcome = "ok"
	}
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
	m.ProviderCalls.WithLabelValues(c.Provider, c.Model, m.TenantLabel(tenant), r.Outcome).Inc()
	if !c.NoModel {
		if r.Priced {
			m.JudgeCost.WithLabelValues(c.Provider, m.ModelLabel(c.Provider, c.Model), m.TenantLabel(tenant)).Add(r.CostUSD)
		} else {
			m.JudgeUnpriced.WithLabelValues(c.Provider, m.ModelLabel(c.Provider, c.Model)).Inc()
		}
	}
	m.ProviderModeCalls.WithLabelValues(c.Provider, c.Model, c.mode(), r.Outcome).Inc()
}

// mode is the call's judge mode label.
func (c ProviderCall) mode() string {
	if c.Mode == ModeBatch {
		return ModeBatch
	}
	return ModeDirect
}

// ProviderBatch counts a provider batch of the batch judge mode reaching status
// ("created", an ended batch's status, or "submit_failed").
func ProviderBatch(provider, status string) {
	Default().ProviderBatches.WithLabelValues(provider, status).Inc()
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
