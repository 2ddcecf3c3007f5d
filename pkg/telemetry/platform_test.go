package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// recordEverything moves every tribunal metric at least once, so that linting and the
// dashboard check see every family with samples.
func recordEverything(t *testing.T, m *telemetry.Metrics) {
	t.Helper()
	ctx := telemetry.WithEvent(context.Background(), telemetry.Event{Tenant: "team-a"})
	telemetry.Handled("judge", "gates.done", "team-a", time.Millisecond, nil)
	telemetry.Handled("judge", "gates.done", "team-a", time.Millisecond, errors.New("x"))
	telemetry.JudgeCall(events.KindAB, events.JudgeInfo{Provider: "openai", Model: "gpt", PromptTokens: 1, CompletionTokens: 1}, "ok")
	telemetry.JudgeCall(events.KindAB, events.JudgeInfo{Provider: "openai", Model: "gpt", Cached: true}, "ok")
	telemetry.GateFailures(&events.GatesFailed{Kind: events.KindAB, Blocked: "x"})
	telemetry.JudgeDisagreements(events.KindAB, &events.IterationDecided{Disagreements: 1})
	telemetry.DeadLettered("gater", 1)
	telemetry.Refused("aggregator", "subject_tenant")
	telemetry.IngressRequest("POST /v1/events", 202)
	_, end := telemetry.StartProviderCall(ctx, telemetry.ProviderCall{Provider: "openai", Model: "gpt", Kind: "ab"})
	end(telemetry.ProviderResult{Outcome: "ok"})
	_, end = telemetry.StartProviderCall(ctx, telemetry.ProviderCall{Provider: "openai", Model: "gpt", Kind: "ab"})
	end(telemetry.ProviderResult{Outcome: "ok", Priced: true, CostUSD: 0.001})
	telemetry.ProviderRetry(ctx, "openai", "gpt", telemetry.RetryRateLimited, 429, 1, time.Second)
	telemetry.ProviderRateLimited("openai", "gpt")
	telemetry.ProviderBatch("openai", "created")
	m.WatchPending("judge", func(context.Context) (map[string]uint64, error) { return map[string]uint64{"tribunal-judge": 3}, nil }, nil)
	alpha := 0.5
	telemetry.BatchJudged("team-a", []telemetry.JudgeFigures{{Provider: "openai", Model: "gpt", SlotA: 7, Decided: 10, Flips: 1, Pairs: 4, Agreed: 3, Compared: 4}}, &alpha, true)
}

// TestMetricsLint: every family the process exports passes Prometheus' own linter
// (names, units, help, counters ending in _total, histogram units in seconds).
func TestMetricsLint(t *testing.T) {
	m := telemetry.Reset()
	m.SetTenants([]string{"team-a"})
	recordEverything(t, m)
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	listed := telemetry.MetricLabels()
	exported := map[string]bool{}
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "tribunal_") {
			continue
		}
		exported[name] = true
		want, ok := listed[name]
		if !ok {
			t.Errorf("the registry exports %s, which MetricLabels does not list", name)
			continue
		}
		var got []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			got = append(got, l.GetName())
		}
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s has labels %v, MetricLabels says %v", name, got, want)
		}
	}
	for name := range listed {
		if !exported[name] {
			t.Errorf("MetricLabels lists %s, which the registry does not export", name)
		}
	}
}

// TestTenantLabelBounded: configured tenants keep their label, anything else collapses
// into "other"; without configured tenants only "default" keeps its name.
func TestTenantLabelBounded(t *testing.T) {
	m := telemetry.Reset()
	for _, tenant := range []string{"default", "team-a", "team-zz"} {
		telemetry.Handled("renderer", "render.requested", tenant, time.Millisecond, nil)
	}
	if got := m.Value("tribunal_events_handled_total", "tenant=default"); got != 1 {
		t.Errorf("default without configured tenants: %v, want 1", got)
	}
	if got := m.Value("tribunal_events_handled_total", "tenant=other"); got != 2 {
		t.Errorf("other without configured tenants: %v, want 2", got)
	}

	m = telemetry.Reset()
	m.SetTenants([]string{"team-a", "team-b"})
	for i := range 50 {
		telemetry.Handled("renderer", "render.requested", fmt.Sprintf("intruder-%d", i), time.Millisecond, nil)
	}
	telemetry.Handled("renderer", "render.requested", "team-a", time.Millisecond, nil)
	telemetry.Handled("renderer", "render.requested", "team-b", time.Millisecond, errors.New("x"))
	if got := m.Value("tribunal_events_handled_total", "tenant=team-a"); got != 1 {
		t.Errorf("team-a %v, want 1", got)
	}
	if got := m.Value("tribunal_events_failed_total", "tenant=team-b"); got != 1 {
		t.Errorf("team-b failed %v, want 1", got)
	}
	if got := m.Value("tribunal_events_handled_total", "tenant=other"); got != 50 {
		t.Errorf("other %v, want 50", got)
	}
	fams, _ := m.Registry.Gather()
	for _, f := range fams {
		if f.GetName() == "tribunal_events_handled_total" && len(f.GetMetric()) != 2 {
			t.Errorf("%d handled series, want 2 (team-a and other)", len(f.GetMetric()))
		}
	}
}

func TestBuildInfo(t *testing.T) {
	telemetry.SetVersion("v1.2.3")
	t.Cleanup(func() { telemetry.SetVersion("dev") })
	m := telemetry.Reset()
	if got := m.Value("tribunal_build_info", "version=v1.2.3", "goversion="+runtime.Version()); got != 1 {
		t.Fatalf("build_info = %v, want 1 with the version and Go release", got)
	}
}

// TestConsumerPendingOnlyFromReporter: a backlog is exported per consumer, and only
// while this instance is the elected reporter.
func TestConsumerPendingOnlyFromReporter(t *testing.T) {
	m := telemetry.Reset()
	reporting := false
	m.WatchPending("judge", func(context.Context) (map[string]uint64, error) {
		return map[string]uint64{"tribunal-judge-team-a": 4, "tribunal-judge-team-b": 1}, nil
	}, func() bool { return reporting })
	if got := m.Value("tribunal_consumer_pending"); got != 0 {
		t.Fatalf("exported %v while another instance reports", got)
	}
	reporting = true
	if got := m.Value("tribunal_consumer_pending", "service=judge", "consumer=tribunal-judge-team-a"); got != 4 {
		t.Errorf("team-a's consumer %v, want 4", got)
	}
	if got := m.Value("tribunal_consumer_pending", "service=judge"); got != 5 {
		t.Errorf("judge %v, want 5", got)
	}
}

// TestStartSpanOwnIDWithoutSDK: with no SDK installed (no exporter configured) a span
// still gets its own span id in its parent's trace, so the next service's span is linked
// to this one and not to this one's parent.
func TestStartSpanOwnIDWithoutSDK(t *testing.T) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	root := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2}, SpanID: trace.SpanID{3, 4}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), root)
	ctx1, _ := telemetry.StartSpan(ctx, "first")
	ctx2, _ := telemetry.StartSpan(ctx1, "second")
	s1, s2 := trace.SpanContextFromContext(ctx1), trace.SpanContextFromContext(ctx2)
	if s1.TraceID() != root.TraceID() || s2.TraceID() != root.TraceID() {
		t.Fatalf("traces %s %s, want %s", s1.TraceID(), s2.TraceID(), root.TraceID())
	}
	if s1.SpanID() == root.SpanID() || s2.SpanID() == s1.SpanID() || !s1.IsValid() || !s2.IsSampled() {
		t.Fatalf("span ids root %s, first %s, second %s: each span needs its own", root.SpanID(), s1.SpanID(), s2.SpanID())
	}
	md := map[string]string{}
	telemetry.Inject(ctx2, md)
	if !strings.Contains(md["traceparent"], s2.SpanID().String()) {
		t.Errorf("traceparent %q does not carry the second span", md["traceparent"])
	}
	// No parent: no trace is invented.
	if c, _ := telemetry.StartSpan(context.Background(), "orphan"); trace.SpanContextFromContext(c).IsValid() {
		t.Error("a span without a parent got a trace without an SDK")
	}
}

// TestProviderCallSpan: a provider call is a GenAI client span with the conventions'
// attributes and a measured, tenant-labelled call; a failure sets error.type.
func TestProviderCallSpan(t *testing.T) {
	m := telemetry.Reset()
	m.SetTenants([]string{"team-a"})
	exp := otlpsink.RecordGlobal(t)

	ctx := telemetry.WithEvent(context.Background(), telemetry.Event{Tenant: "team-a"})
	temp, seed := 0.0, 7
	cctx, end := telemetry.StartProviderCall(ctx, telemetry.ProviderCall{Provider: "openai", Model: "gpt-4o-mini", Kind: "ab",
		ServerAddress: "api.openai.com", ServerPort: 443, Temperature: &temp, Seed: &seed, MaxTokens: 300, Structured: true})
	telemetry.ProviderRetry(cctx, "openai", "gpt-4o-mini", telemetry.RetryRateLimited, 429, 1, time.Second)
	end(telemetry.ProviderResult{Model: "gpt-4o-mini-2024-07-18", InputTokens: 120, OutputTokens: 30, Outcome: "ok",
		ID: "chatcmpl-123", FinishReasons: []string{"stop"}})
	_, end = telemetry.StartProviderCall(ctx, telemetry.ProviderCall{Provider: "openai", Model: "gpt-4o-mini", Kind: "critic"})
	// The limit and seed the provider sent, its defaults for a request that set none.
	sent := 11
	end(telemetry.ProviderResult{Outcome: "rate_limited", Err: errors.New("HTTP 429"), MaxTokens: 4096, Seed: &sent})
	// Recorded answers (the scripted judge) ask no model: no GenAI span, same metrics.
	_, end = telemetry.StartProviderCall(ctx, telemetry.ProviderCall{Provider: "scripted", Model: "scripted-A", Kind: "ab", NoModel: true})
	end(telemetry.ProviderResult{Model: "scripted-A"})

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		out := map[string]string{}
		for _, a := range s.Attributes {
			out[string(a.Key)] = a.Value.Emit()
		}
		return out
	}
	ok, failed := spans[0], spans[1]
	if ok.Name != "chat gpt-4o-mini" || ok.SpanKind != trace.SpanKindClient {
		t.Errorf("span %q kind %v", ok.Name, ok.SpanKind)
	}
	for k, v := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
		"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": "120",
		"gen_ai.usage.output_tokens": "30", "gen_ai.request.temperature": "0", "gen_ai.request.seed": "7", "gen_ai.request.max_tokens": "300",
		"gen_ai.output.type": "json", "server.address": "api.openai.com", "server.port": "443", "tribunal.tenant": "team-a", "tribunal.judge.kind": "ab",
		"gen_ai.response.id": "chatcmpl-123", "gen_ai.response.finish_reasons": `["stop"]`} {
		if got := attrs(ok)[k]; got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if _, has := attrs(ok)["error.type"]; has {
		t.Error("a successful call has error.type")
	}
	if len(ok.Events) != 1 || ok.Events[0].Name != "retry" {
		t.Errorf("events %v, want one retry", ok.Events)
	}
	if attrs(failed)["error.type"] != "rate_limited" || failed.Status.Description == "" {
		t.Errorf("failed call: error.type %q, status %v", attrs(failed)["error.type"], failed.Status)
	}
	if a := attrs(failed); a["gen_ai.request.max_tokens"] != "4096" || a["gen_ai.request.seed"] != "11" {
		t.Errorf("failed call: max_tokens %q seed %q, want what was sent", a["gen_ai.request.max_tokens"], a["gen_ai.request.seed"])
	}
	recorded := spans[2]
	if recorded.Name != "recorded ab" || recorded.SpanKind != trace.SpanKindInternal {
		t.Errorf("recorded call: span %q kind %v, want an internal span", recorded.Name, recorded.SpanKind)
	}
	for k, v := range attrs(recorded) {
		if strings.HasPrefix(k, "gen_ai.") {
			t.Errorf("recorded call has %s = %q: no GenAI call was made", k, v)
		}
	}
	if a := attrs(recorded); a["tribunal.judge.provider"] != "scripted" || a["tribunal.judge.kind"] != "ab" {
		t.Errorf("recorded call attributes %v", a)
	}
	if got := m.Value("tribunal_provider_calls_total", "provider=scripted", "outcome=ok"); got != 1 {
		t.Errorf("recorded calls %v, want 1", got)
	}
	if got := m.Value("tribunal_provider_call_duration_seconds", "provider=openai", "model=gpt-4o-mini", "kind=ab", "outcome=ok"); got != 1 {
		t.Errorf("duration observations %v, want 1", got)
	}
	if got := m.Value("tribunal_provider_calls_total", "tenant=team-a", "outcome=rate_limited"); got != 1 {
		t.Errorf("rate-limited calls of team-a %v, want 1", got)
	}
	if got := m.Value("tribunal_provider_retries_total", "provider=openai", "reason=rate_limited"); got != 1 {
		t.Errorf("retries %v, want 1", got)
	}
}
