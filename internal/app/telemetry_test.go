package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/internal/testutil/syncbuf"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

const tenant = "team-a"

// meteredProvider is a scripted judge that reports token usage (the scripted provider
// reports none) and, while held, keeps every call waiting so a test can see the judge's
// backlog.
type meteredProvider struct {
	*scripted.Provider
	hold chan struct{}
}

func newMetered(t *testing.T) *meteredProvider {
	t.Helper()
	s, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	return &meteredProvider{Provider: s, hold: make(chan struct{})}
}

func (p *meteredProvider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	select {
	case <-p.hold:
	case <-ctx.Done():
		return judge.Response{}, ctx.Err()
	}
	resp, err := p.Provider.Complete(ctx, req)
	resp.PromptTokens, resp.CompletionTokens = 100, 7
	return resp, err
}

// scrape reads the metrics endpoint over HTTP into sample -> value, keyed by the sample
// as exposed (`name{label="value",...}`), labels as written by the exposition format.
func scrape(t *testing.T, addr string) samples {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	var out samples
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		s := sample{labels: map[string]string{}, value: v}
		key := line[:i]
		name, rest, hasLabels := strings.Cut(key, "{")
		s.name = name
		if hasLabels {
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				if k, val, ok := strings.Cut(kv, "="); ok {
					s.labels[k] = strings.Trim(val, `"`)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

type samples []sample

// sum adds every sample of name whose labels include want ("k=v" pairs); found says
// whether any matched.
func (ss samples) sum(name string, want ...string) (total float64, found bool) {
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for _, w := range want {
			k, v, _ := strings.Cut(w, "=")
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		found = true
	}
	return total, found
}

// settled scrapes until every counter in want (name, labels... -> value) has its value,
// for at most 10 s, and returns the last scrape. A service counts a delivery once its
// handler returns, which can be just after the batch it completed is reported complete
// (and a judge's verdict can complete a batch before the judge's own handler returns).
func settled(t *testing.T, addr string, want map[string]float64) samples {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := scrape(t, addr)
		ok := true
		for key, v := range want {
			parts := strings.Split(key, " ")
			if got, _ := m.sum(parts[0], parts[1:]...); got != v {
				ok = false
			}
		}
		if ok || time.Now().After(deadline) {
			return m // expect names what is still missing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (ss samples) expect(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	if got, _ := ss.sum(name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// TestMetricsCountABatch runs a batch through the four services and reads, over HTTP,
// counters that moved by exactly the batch's numbers; a second identical batch is
// answered from the judge cache.
func TestMetricsCountABatch(t *testing.T) {
	telemetry.Reset()
	env := e2e.NewEnv(t)
	p := newMetered(t)
	r := env.Start(p, "judge-1", bus.Services...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := app.ServeHealth(ctx, "127.0.0.1:0", r.Ready, slog.Default())
	if err != nil {
		t.Fatal(err)
	}

	const n = 3
	files := e2e.TextBatch(n, "")
	files["batch.yaml"] += "  - id: AC-missing\n    criterion: x\n    ours: nope.md\n    reference: ref/0.md\n"
	b := e2e.WriteBatch(t, files)
	sub := env.Submit(b, tenant)

	// The judge holds every call: its consumer's backlog is the n gated jobs.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, found := scrape(t, addr).sum("tribunal_consumer_pending", "service=judge")
		if found && got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("judge backlog %v (reported: %v), want %d", got, found, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(p.hold)
	res := env.Wait(sub, 15*time.Second)
	if res.Summary.Compared != n || res.Summary.Blocked != 1 {
		t.Fatalf("summary %+v", res.Summary)
	}

	m := settled(t, addr, map[string]float64{
		"tribunal_events_handled_total service=renderer type=render.requested":  n + 1,
		"tribunal_events_handled_total service=gater type=render.done":          n + 1,
		"tribunal_events_handled_total service=judge type=gates.done":           n,
		"tribunal_events_handled_total service=aggregator type=job.submitted":   n + 1,
		"tribunal_events_handled_total service=aggregator type=verdict.emitted": n,
		"tribunal_events_handled_total service=aggregator type=gates.failed":    1,
		"tribunal_handler_seconds_count service=judge":                          n,
	})
	m.expect(t, n+1, "tribunal_events_handled_total", "service=renderer", "type=render.requested")
	m.expect(t, n+1, "tribunal_events_handled_total", "service=gater", "type=render.done")
	m.expect(t, n, "tribunal_events_handled_total", "service=judge", "type=gates.done")
	m.expect(t, n+1, "tribunal_events_handled_total", "service=aggregator", "type=job.submitted")
	m.expect(t, n, "tribunal_events_handled_total", "service=aggregator", "type=verdict.emitted")
	m.expect(t, 1, "tribunal_events_handled_total", "service=aggregator", "type=gates.failed")
	m.expect(t, 0, "tribunal_events_failed_total", "service=renderer")
	m.expect(t, 0, "tribunal_events_failed_total", "service=judge")
	// The blocked AC made no judge call: n calls for n+1 ACs.
	m.expect(t, n, "tribunal_judge_calls_total", "provider=scripted", "model=fixed-A", "kind=ab", "status=ok")
	m.expect(t, n, "tribunal_judge_calls_total")
	m.expect(t, n*100, "tribunal_judge_tokens_total", "provider=scripted", "direction=prompt")
	m.expect(t, n*7, "tribunal_judge_tokens_total", "direction=completion")
	m.expect(t, 0, "tribunal_judge_cache_hits_total")
	m.expect(t, 1, "tribunal_gate_failures_total", "kind=ab", "gate=blocked")
	m.expect(t, 0, "tribunal_dead_letters_total")
	m.expect(t, n, "tribunal_handler_seconds_count", "service=judge")
	if p.Calls() != n {
		t.Fatalf("provider calls %d, want %d", p.Calls(), n)
	}

	// The same batch again: every verdict comes from the cache.
	res = env.Wait(env.Submit(b, tenant), 15*time.Second)
	if res.Summary.Compared != n {
		t.Fatalf("second run summary %+v", res.Summary)
	}
	m = settled(t, addr, map[string]float64{
		"tribunal_events_handled_total service=renderer type=render.requested": 2 * (n + 1),
		"tribunal_events_handled_total service=judge type=gates.done":          2 * n,
	})
	m.expect(t, n, "tribunal_judge_cache_hits_total", "kind=ab")
	m.expect(t, n, "tribunal_judge_calls_total")
	m.expect(t, 2*(n+1), "tribunal_events_handled_total", "service=renderer", "type=render.requested")
	m.expect(t, 2*n, "tribunal_events_handled_total", "service=judge", "type=gates.done")
	if p.Calls() != n {
		t.Fatalf("provider calls after the cached run %d, want %d", p.Calls(), n)
	}

	// Once everything is acked, no service has a backlog.
	deadline = time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, addr)
		total, _ := m.sum("tribunal_consumer_pending")
		var reported int
		for _, svc := range bus.Services {
			if _, ok := m.sum("tribunal_consumer_pending", "service="+svc); ok {
				reported++
			}
		}
		if total == 0 && reported == len(bus.Services) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog %v over %d of %d services", total, reported, len(bus.Services))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOneTracePerAC: every span the four services record for one AC shares one trace,
// rooted in the submitter's producer span of the AC's job.submitted (recorded, not a
// virtual parent), and each service's consumer span is the child of the producer span
// its input was published in, itself the child of the span that produced it, so the
// trace is carried through the events' metadata.
func TestOneTracePerAC(t *testing.T) {
	exp := otlpsink.RecordGlobal(t)

	env := e2e.NewEnv(t)
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	env.Start(p, "judge-1", bus.Services...)
	b := e2e.WriteBatch(t, e2e.TextBatch(2, ""))
	sub := env.Submit(b, tenant)
	env.Wait(sub, 15*time.Second)

	// A span's role: "<service> <type>" for a consumer span, "publish <type>" for a
	// producer span.
	role := func(s tracetest.SpanStub) (job, name string) {
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		switch s.SpanKind {
		case trace.SpanKindConsumer:
			return attrs["tribunal.job"], attrs["tribunal.service"] + " " + attrs["tribunal.event.type"]
		case trace.SpanKindProducer:
			return attrs["tribunal.job"], "publish " + attrs["tribunal.event.type"]
		}
		return attrs["tribunal.job"], s.Name
	}
	chain := []string{"publish job.submitted", "aggregator job.submitted", "publish render.requested", "renderer render.requested",
		"publish render.done", "gater render.done", "publish gates.done", "judge gates.done", "publish verdict.emitted", "aggregator verdict.emitted"}
	byJob := map[string]map[string][]tracetest.SpanStub{}
	// The aggregator's last span ends just after the batch shows complete.
	deadline := time.Now().Add(5 * time.Second)
	for {
		byJob = map[string]map[string][]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			job, name := role(s)
			if job == "" {
				continue // the batch's own events (batch.opened, batch.completed): no AC's trace
			}
			if byJob[job] == nil {
				byJob[job] = map[string][]tracetest.SpanStub{}
			}
			byJob[job][name] = append(byJob[job][name], s)
		}
		complete := len(byJob) == 2
		for _, spans := range byJob {
			for _, name := range chain {
				complete = complete && len(spans[name]) > 0
			}
		}
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans by job: %v", names(byJob))
		}
		time.Sleep(10 * time.Millisecond)
	}

	traces := map[string]string{}
	for job, spans := range byJob {
		root := spans["publish job.submitted"][0]
		if root.Parent.IsValid() {
			t.Errorf("%s: the submission's span has parent %s, want it the trace's recorded root", job, root.Parent.SpanID())
		}
		for i := 1; i < len(chain); i++ {
			s, parent := spans[chain[i]][0], spans[chain[i-1]][0]
			if s.Parent.SpanID() != parent.SpanContext.SpanID() {
				t.Errorf("%s: span %q has parent %s, want %q's %s", job, chain[i], s.Parent.SpanID(), chain[i-1], parent.SpanContext.SpanID())
			}
		}
		for name, ss := range spans {
			for _, s := range ss {
				if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
					t.Errorf("%s: span %q in trace %s, want the root's %s", job, name, s.SpanContext.TraceID(), root.SpanContext.TraceID())
				}
			}
		}
		if other, dup := traces[root.SpanContext.TraceID().String()]; dup {
			t.Errorf("jobs %s and %s share trace %s", job, other, root.SpanContext.TraceID())
		}
		traces[root.SpanContext.TraceID().String()] = job
	}
}

func names(byJob map[string]map[string][]tracetest.SpanStub) map[string][]string {
	out := map[string][]string{}
	for job, spans := range byJob {
		for name := range spans {
			out[job] = append(out[job], name)
		}
	}
	return out
}

// TestJSONLogsCarryJob: with a JSON logger (what --log-format json installs), the lines
// the services log while handling an event carry its tenant, batch and job, and, traces
// being recorded, the trace.
func TestJSONLogsCarryJob(t *testing.T) {
	otlpsink.RecordGlobal(t)
	var sink syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(io.Writer(&sink), &slog.HandlerOptions{Level: slog.LevelDebug}))
	env := e2e.NewEnv(t)
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := app.Start(context.Background(), env.Conn(), app.Options{Bus: env.Bus, Concurrency: 4, Store: env.Store,
		Provider: p, Instance: "logs", CloseTimeout: 10 * time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	sub := env.Submit(e2e.WriteBatch(t, e2e.TextBatch(1, "")), tenant)
	env.Wait(sub, 15*time.Second)
	r.Close()

	handled := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(sink.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if rec["msg"] != "event handled" || rec["event_type"] == string(events.TypeBatchOpened) {
			continue // the batch's own event names no job
		}
		for _, k := range []string{"tenant", "batch", "job", "event_type", "event_id", "trace_id", "service"} {
			if s, _ := rec[k].(string); s == "" {
				t.Errorf("line without %s: %s", k, line)
			}
		}
		if rec["tenant"] != tenant || rec["batch"] != sub.BatchID || rec["job"] != "AC-1" {
			t.Errorf("line names another job: %s", line)
		}
		handled[fmt.Sprint(rec["service"])] = true
	}
	for _, svc := range bus.Services {
		if !handled[svc] {
			t.Errorf("no \"event handled\" line from %s", svc)
		}
	}
}
