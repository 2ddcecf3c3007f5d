package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
)

// otelEnv is the process environment without any OTEL_* setting of the machine running
// the tests, plus extra.
func otelEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestRunExportsOneTracePerAC runs the quickstart with an OTLP endpoint set, over each
// protocol, against an in-process receiver. The spans arrive before the process exits
// (the provider is flushed on exit), every AC is one trace rooted in the recorded span
// of its submission and holding the four services' consumer spans, each under the
// producer span its input was published in (checkACTrace), and the judge's span has
// the recorded answer's span under it: the scripted judge asks no model, so it is no
// GenAI span.
func TestRunExportsOneTracePerAC(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			var sink *otlpsink.Sink
			var endpoint string
			if proto == "grpc" {
				sink, endpoint = otlpsink.StartGRPC(t)
			} else {
				sink, endpoint = otlpsink.StartHTTP(t)
			}
			cmd := exec.Command(binary, "run", "examples/quickstart", "--out", t.TempDir())
			cmd.Dir = repoRoot(t)
			cmd.Env = otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL="+proto,
				"OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_SERVICE_NAME=tribunal-test", "TRIBUNAL_EPHEMERAL=true")
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("run: %v, want exit 1\n%s", err, out)
			}
			spans := sink.Spans()
			if len(spans) == 0 {
				t.Fatalf("no span received before the process exited\n%s", out)
			}
			for _, s := range spans {
				if s.Service != "tribunal-test" {
					t.Fatalf("span %q from service %q, want OTEL_SERVICE_NAME's tribunal-test", s.Name, s.Service)
				}
			}
			checkACTrace(t, spans, "AC-1", "ab", "tribunal-test")
			checkACTrace(t, spans, "AC-11", "critic", "tribunal-test")
			// equivalence: the renderer runs the documents through the provider too.
			checkACTrace(t, spans, "AC-12", "equivalence", "tribunal-test")
			t.Logf("%d spans", len(spans))
		})
	}
}

// TestOtelSubmitRootsEveryTrace: a batch submitted with `tribunal submit` to a served
// deployment (`serve nats`, `serve all`), both exporting to one OTLP receiver, yields
// one trace per AC whose root is the submitter's own span, exported by the `submit`
// process ("publish tribunal.{tenant}.job.submitted", a PRODUCER span): no span of any
// trace hangs off a parent nobody exported. Every publish is a producer span and every
// handling a consumer span, named by the messaging conventions ("{operation}
// {destination template}"). The client's clean exit logs no disconnection.
func TestOtelSubmitRootsEveryTrace(t *testing.T) {
	sink, endpoint := otlpsink.StartHTTP(t)
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=100"}
	natsURL, blobURL := serveStackEnv(t, append(otel, "OTEL_SERVICE_NAME=tribunal-services")...)
	dir := repoRoot(t)
	submitEnv := otelEnv(append(otel, "OTEL_SERVICE_NAME=tribunal-submit")...)
	cmd := exec.Command(binary, "submit", "examples/quickstart", "--nats", natsURL, "--blob", blobURL)
	cmd.Dir, cmd.Env = dir, submitEnv
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("submit: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "nats disconnected") {
		t.Errorf("submit's clean exit warned of a disconnection:\n%s", stderr.String())
	}
	id := strings.TrimSpace(stdout.String())
	watch := exec.Command(binary, "watch", "--batch", id, "--quiet", "--nats", natsURL, "--blob", blobURL)
	watch.Dir, watch.Env = dir, otelEnv()
	if out, err := watch.CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("watch: %v\n%s", err, out)
		}
	} else if strings.Contains(string(out), "nats disconnected") {
		t.Errorf("watch's clean exit warned of a disconnection:\n%s", out)
	}

	// The services export in batches: wait until every AC's last span has arrived.
	var spans []otlpsink.Span
	poll.Until(t, 60*time.Second, "every AC's verdict handled in the sink", func() (bool, string) {
		spans = sink.Spans()
		handled := map[string]bool{}
		for _, s := range spans {
			if s.Name == "process tribunal.{tenant}.verdict.emitted" && s.Attrs["tribunal.batch"] == id {
				handled[s.Attrs["tribunal.job"]] = true
			}
		}
		return handled["AC-1"] && handled["AC-11"] && handled["AC-12"], fmt.Sprintf("%d spans, verdicts handled %v", len(spans), handled)
	})
	for _, tc := range []struct{ job, kind string }{{"AC-1", "ab"}, {"AC-11", "critic"}, {"AC-12", "equivalence"}} {
		mine := checkACTrace(t, spans, tc.job, tc.kind, "tribunal-submit")
		for _, s := range mine {
			if s.ParentSpanID != "" && s.Service != "tribunal-services" {
				t.Errorf("%s: span %q from %q, want the services'", tc.job, s.Name, s.Service)
			}
		}
	}
}

// serveStackEnv is serveStack with variables added to the services' environment.
func serveStackEnv(t *testing.T, env ...string) (natsURL, blobURL string) {
	t.Helper()
	natsAddr, health := freeport.Addr(t), freeport.Addr(t)
	natsURL = "nats://" + natsAddr
	blobURL = "file://" + filepath.Join(t.TempDir(), "blobs")
	start(t, "serve", "nats", "--listen", natsAddr, "--store", t.TempDir())
	startWithEnv(t, env, "serve", "all", "--nats", natsURL, "--blob", blobURL, "--health", health)
	waitHTTP(t, "http://"+health+"/readyz")
	return natsURL, blobURL
}

// checkACTrace holds one AC's spans to one trace: exactly one root, the submission's
// producer span ("publish tribunal.{tenant}.job.submitted", exported by rootService),
// every other span's parent exported too; each service's consumer span "process
// tribunal.{tenant}.<input>" under the producer span "publish tribunal.{tenant}.<input>"
// its input was published in, itself under the span that produced it; the provider's
// call under the judge's span (the runner's under the renderer's for equivalence). It
// returns the trace's spans.
func checkACTrace(t *testing.T, spans []otlpsink.Span, job, kind, rootService string) []otlpsink.Span {
	t.Helper()
	var trace string
	for _, s := range spans {
		if s.Attrs["tribunal.job"] == job && s.ParentSpanID == "" {
			trace = s.TraceID
			break
		}
	}
	if trace == "" {
		t.Fatalf("%s: no root span", job)
	}
	var mine []otlpsink.Span
	ids := map[string]otlpsink.Span{}
	for _, s := range spans {
		if s.TraceID != trace {
			if s.Attrs["tribunal.job"] == job && s.Attrs["tribunal.batch"] == mineBatch(spans, trace) {
				t.Errorf("%s: span %q in trace %s, another than %s", job, s.Name, s.TraceID, trace)
			}
			continue
		}
		if j := s.Attrs["tribunal.job"]; j != "" && j != job {
			t.Errorf("%s's trace holds a span of %s: %q", job, j, s.Name)
		}
		if _, dup := ids[s.SpanID]; dup {
			t.Errorf("%s: span id %s used twice", job, s.SpanID)
		}
		ids[s.SpanID] = s
		mine = append(mine, s)
	}
	roots := 0
	for _, s := range mine {
		if s.ParentSpanID == "" {
			roots++
			if s.Name != "publish tribunal.{tenant}.job.submitted" || s.Kind != "SPAN_KIND_PRODUCER" || s.Service != rootService {
				t.Errorf("%s: root span %q kind %s from %q, want the submission's producer span from %s", job, s.Name, s.Kind, s.Service, rootService)
			}
		} else if _, ok := ids[s.ParentSpanID]; !ok {
			t.Errorf("%s: span %q hangs off %s, which no process exported", job, s.Name, s.ParentSpanID)
		}
	}
	if roots != 1 {
		t.Errorf("%s: %d roots, want 1", job, roots)
	}
	names := func() []string {
		var out []string
		for _, s := range mine {
			out = append(out, s.Name)
		}
		return out
	}
	// consumer is the consumer span of service's input typ, checked against the
	// conventions and under its producer span, whose parent it returns too.
	consumer := func(service, typ string) (span, producer otlpsink.Span) {
		t.Helper()
		for _, s := range mine {
			if s.Name == "process tribunal.{tenant}."+typ && s.Attrs["tribunal.service"] == service {
				span = s
			}
		}
		if span.SpanID == "" {
			t.Fatalf("%s: no span of %s handling %s among %q", job, service, typ, names())
		}
		producer = ids[span.ParentSpanID]
		if producer.Name != "publish tribunal.{tenant}."+typ || producer.Kind != "SPAN_KIND_PRODUCER" {
			t.Errorf("%s: %s's span of %s is under %q (%s), want its producer span", job, service, typ, producer.Name, producer.Kind)
		}
		for k, v := range map[string]string{"messaging.system": "nats", "messaging.operation.type": "process", "messaging.operation.name": "process",
			"messaging.message.id": span.Attrs["tribunal.event.id"], "messaging.destination.template": "tribunal.{tenant}." + typ} {
			if span.Attrs[k] != v || v == "" {
				t.Errorf("%s: span %q: %s = %q, want %q", job, span.Name, k, span.Attrs[k], v)
			}
		}
		for k, v := range map[string]string{"messaging.system": "nats", "messaging.operation.type": "send", "messaging.operation.name": "publish",
			"messaging.destination.template": "tribunal.{tenant}." + typ, "messaging.message.id": span.Attrs["tribunal.event.id"]} {
			if producer.Attrs[k] != v {
				t.Errorf("%s: span %q: %s = %q, want %q", job, producer.Name, k, producer.Attrs[k], v)
			}
		}
		if !strings.HasPrefix(span.Attrs["messaging.destination.name"], "tribunal.default.") || span.Attrs["messaging.consumer.group.name"] == "" {
			t.Errorf("%s: span %q: destination %q, consumer group %q", job, span.Name, span.Attrs["messaging.destination.name"], span.Attrs["messaging.consumer.group.name"])
		}
		if span.Kind != "SPAN_KIND_CONSUMER" {
			t.Errorf("%s: span %q kind %s", job, span.Name, span.Kind)
		}
		return span, producer
	}
	agg, root := consumer("aggregator", "job.submitted")
	if root.ParentSpanID != "" {
		t.Errorf("%s: the aggregator's input was published under %s, want the root", job, root.ParentSpanID)
	}
	prev := agg
	var renderer, judge otlpsink.Span
	for _, step := range []struct{ service, typ string }{{"renderer", "render.requested"}, {"gater", "render.done"}, {"judge", "gates.done"}, {"aggregator", "verdict.emitted"}} {
		span, producer := consumer(step.service, step.typ)
		if producer.ParentSpanID != prev.SpanID {
			t.Errorf("%s: %s's input was published under %s, want the %s span %s", job, step.service, producer.ParentSpanID, prev.Attrs["tribunal.service"], prev.SpanID)
		}
		switch step.service {
		case "renderer":
			renderer = span
		case "judge":
			judge = span
		}
		prev = span
	}
	// The scripted provider answers from recordings: an internal span, no GenAI call.
	calls := func(parent otlpsink.Span, callKind string) []otlpsink.Span {
		var out []otlpsink.Span
		for _, s := range mine {
			if s.ParentSpanID == parent.SpanID && s.Name == "recorded "+callKind {
				out = append(out, s)
			}
		}
		return out
	}
	call := calls(judge, kind)
	if len(call) == 0 {
		t.Fatalf("%s: no recorded call span under the judge's span among %q", job, names())
	}
	for k, v := range map[string]string{"tribunal.judge.provider": "scripted", "tribunal.judge.kind": kind, "tribunal.tenant": "default"} {
		if call[0].Attrs[k] != v {
			t.Errorf("%s: call span %s = %q, want %q", job, k, call[0].Attrs[k], v)
		}
	}
	if call[0].Kind != "SPAN_KIND_INTERNAL" || call[0].Error {
		t.Errorf("%s: call span kind %s error %v", job, call[0].Kind, call[0].Error)
	}
	for _, s := range mine {
		for k := range s.Attrs {
			if strings.HasPrefix(k, "gen_ai.") {
				t.Errorf("%s: span %q has %s: the scripted judge asks no model", job, s.Name, k)
			}
		}
	}
	if kind == "equivalence" && len(calls(renderer, "runner")) == 0 {
		t.Errorf("%s: no runner call span under the renderer's span", job)
	}
	return mine
}

// mineBatch is the batch of a trace's spans.
func mineBatch(spans []otlpsink.Span, trace string) string {
	for _, s := range spans {
		if s.TraceID == trace && s.Attrs["tribunal.batch"] != "" {
			return s.Attrs["tribunal.batch"]
		}
	}
	return ""
}
