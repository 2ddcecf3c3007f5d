package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

func TestJudgeCallCountsCallsTokensAndCacheHits(t *testing.T) {
	m := telemetry.Reset()
	j := events.JudgeInfo{Provider: "openai", Model: "gpt", PromptTokens: 120, CompletionTokens: 30}
	telemetry.JudgeCall(events.KindAB, j, "ok")
	telemetry.JudgeCall(events.KindAB, j, "schema_violation")
	cached := j
	cached.Cached = true
	telemetry.JudgeCall(events.KindAB, cached, "ok")
	telemetry.JudgeCall(events.KindCritic, events.JudgeInfo{Provider: "openai", Model: "gpt"}, "blocked")

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tribunal_judge_calls_total", []string{"kind=ab", "status=ok", "provider=openai", "model=gpt"}, 1},
		{"tribunal_judge_calls_total", []string{"kind=ab"}, 2},
		{"tribunal_judge_calls_total", []string{"kind=critic"}, 0},
		{"tribunal_judge_tokens_total", []string{"direction=prompt"}, 240},
		{"tribunal_judge_tokens_total", []string{"direction=completion"}, 60},
		{"tribunal_judge_cache_hits_total", []string{"kind=ab"}, 1},
	} {
		if got := m.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestGateFailuresKeepLabelsBounded(t *testing.T) {
	m := telemetry.Reset()
	telemetry.GateFailures(&events.GatesFailed{Kind: events.KindAB, Gates: []events.Gate{
		{Name: "artifact_readable:ours", Status: "fail"}, {Name: "artifact_readable:reference", Status: "pass"},
	}})
	telemetry.GateFailures(&events.GatesFailed{Kind: events.KindEquivalence, Gates: []events.Gate{
		{Name: "transcript_readable:original/case-1", Status: "fail"}, {Name: "transcript_readable:candidate/case-2", Status: "fail"},
	}})
	telemetry.GateFailures(&events.GatesFailed{Kind: events.KindAB, Blocked: "missing input"})
	telemetry.GateFailures(&events.GatesFailed{Kind: events.KindRubric, NeedsContext: "no reference"})
	telemetry.GateFailures(&events.GatesDone{Kind: events.KindAB})

	for labels, want := range map[[2]string]float64{
		{"kind=ab", "gate=artifact_readable"}:            1,
		{"kind=equivalence", "gate=transcript_readable"}: 2,
		{"kind=ab", "gate=blocked"}:                      1,
		{"kind=rubric", "gate=needs_context"}:            1,
	} {
		if got := m.Value("tribunal_gate_failures_total", labels[:]...); got != want {
			t.Errorf("gate failures %v = %v, want %v", labels, got, want)
		}
	}
	if got := m.Value("tribunal_gate_failures_total"); got != 5 {
		t.Errorf("gate failures in all = %v, want 5 (a gates.done records nothing)", got)
	}
}

func TestDisagreementsHandledAndDeadLetters(t *testing.T) {
	m := telemetry.Reset()
	telemetry.JudgeDisagreements(events.KindAB, nil)
	telemetry.JudgeDisagreements(events.KindAB, &events.IterationDecided{})
	telemetry.JudgeDisagreements(events.KindCritic, &events.IterationDecided{Disagreements: 2})
	telemetry.DeadLettered("gater", 1)
	telemetry.Handled("judge", "gates.done", "default", 30*time.Millisecond, nil)
	telemetry.Handled("judge", "gates.done", "default", time.Second, errors.New("provider down"))
	if got := m.Value("tribunal_judge_disagreements_total"); got != 2 {
		t.Errorf("disagreements %v, want 2", got)
	}
	if got := m.Value("tribunal_dead_letters_total", "service=gater"); got != 1 {
		t.Errorf("dead letters %v, want 1", got)
	}
	if h, f := m.Value("tribunal_events_handled_total", "service=judge", "type=gates.done"), m.Value("tribunal_events_failed_total", "service=judge"); h != 1 || f != 1 {
		t.Errorf("handled %v failed %v, want 1 and 1", h, f)
	}
	if got := m.Value("tribunal_handler_seconds", "service=judge"); got != 2 {
		t.Errorf("latency observations %v, want 2", got)
	}
}

// TestResetIsolates: a test reading the default after Reset sees nothing recorded
// before it, and the package Handler follows the new default.
func TestResetIsolates(t *testing.T) {
	telemetry.DeadLettered("renderer", 3)
	telemetry.Reset()
	telemetry.DeadLettered("renderer", 1)
	rec := httptest.NewRecorder()
	telemetry.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `tribunal_dead_letters_total{service="renderer"} 1`) {
		t.Fatalf("scrape after reset:\n%s", grep(body, "tribunal_"))
	}
	if !strings.Contains(body, "go_goroutines") {
		t.Error("no Go runtime metrics")
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestConsumerPendingAskedAtScrape(t *testing.T) {
	m := telemetry.Reset()
	n := uint64(0)
	stopOld := m.WatchPending("judge", func(context.Context) (map[string]uint64, error) { return map[string]uint64{"tribunal-judge": 99}, nil }, nil)
	stop := m.WatchPending("judge", func(context.Context) (map[string]uint64, error) {
		n++
		return map[string]uint64{"tribunal-judge": n}, nil
	}, nil)
	m.WatchPending("gater", func(context.Context) (map[string]uint64, error) { return nil, errors.New("nats down") }, nil)
	stopOld() // an earlier registration's stop leaves the later one
	if got := m.Value("tribunal_consumer_pending", "service=judge"); got != 1 {
		t.Fatalf("pending %v, want 1 (the later source, asked once)", got)
	}
	if got := m.Value("tribunal_consumer_pending", "service=judge"); got != 2 {
		t.Fatalf("pending %v, want 2: asked again at the next scrape", got)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), `service="gater"`) {
		t.Error("a failing source is reported instead of left out")
	}
	stop()
	if strings.Contains(grep(scrapeBody(m), "tribunal_consumer_pending{"), "judge") {
		t.Error("a stopped source is still reported")
	}
}

func scrapeBody(m *telemetry.Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestTraceContextRoundTrip: a message without a traceparent gives no parent (the span
// started for it is its trace's root, recorded where it is handled); one with a
// traceparent gives that producer's span context, as a remote parent.
func TestTraceContextRoundTrip(t *testing.T) {
	if sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), map[string]string{})); sc.IsValid() {
		t.Fatalf("extracted %v from no header", sc)
	}
	if sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), nil)); sc.IsValid() {
		t.Fatalf("extracted %v from nothing", sc)
	}

	// A header survives a round trip.
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
	md := map[string]string{}
	telemetry.Inject(trace.ContextWithSpanContext(context.Background(), parent), md)
	if md["traceparent"] == "" {
		t.Fatalf("no traceparent in %v", md)
	}
	got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), md))
	if got.TraceID() != parent.TraceID() || got.SpanID() != parent.SpanID() || !got.IsRemote() {
		t.Fatalf("round trip gave %v, want %v", got, parent)
	}
	// A context without a span leaves metadata alone.
	md2 := map[string]string{"k": "v"}
	telemetry.Inject(context.Background(), md2)
	if len(md2) != 1 {
		t.Fatalf("metadata changed: %v", md2)
	}
}

func TestContextHandlerAddsEventAndTrace(t *testing.T) {
	var buf bytes.Buffer
	log := telemetry.WithContext(slog.New(slog.NewJSONHandler(io.Writer(&buf), nil))).With("service", "gater")
	if telemetry.WithContext(log) != log {
		t.Error("wrapping twice should be a no-op")
	}
	root := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7, 7}, SpanID: trace.SpanID{8, 8}, TraceFlags: trace.FlagsSampled})
	ctx := telemetry.WithEvent(trace.ContextWithSpanContext(context.Background(), root),
		telemetry.Event{Tenant: "team-a", Batch: "b1", Job: "AC-1", Type: "render.done", ID: "e1"})
	log.InfoContext(ctx, "gated", "job", "AC-1")
	log.Info("no context")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"service": "gater", "tenant": "team-a", "batch": "b1", "job": "AC-1", "event_type": "render.done",
		"event_id": "e1", "trace_id": root.TraceID().String(), "span_id": root.SpanID().String()}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v, want %q", k, rec[k], v)
		}
	}
	if strings.Count(lines[0], `"job"`) != 1 {
		t.Errorf("job repeated: %s", lines[0])
	}
	if strings.Contains(lines[1], "tenant") {
		t.Errorf("a line without context got event fields: %s", lines[1])
	}
}
