package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
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
// (the provider is flushed on exit), every AC is one trace holding a span from each of
// the four services, each linked to the span that produced its input, and the judge's
// span has a GenAI client span under it with the conventions' attributes.
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
			checkACTrace(t, spans, "AC-1", "ab")
			checkACTrace(t, spans, "AC-11", "critic")
			// equivalence: the renderer runs the documents through the model too.
			checkACTrace(t, spans, "AC-12", "equivalence")
			t.Logf("%d spans", len(spans))
		})
	}
}

// checkACTrace holds one AC's spans to one trace across the four services with a GenAI
// span of kind under the judge's, and returns them.
func checkACTrace(t *testing.T, spans []otlpsink.Span, job, kind string) []otlpsink.Span {
	t.Helper()
	var trace string
	for _, s := range spans {
		if s.Attrs["tribunal.job"] == job {
			trace = s.TraceID
			break
		}
	}
	if trace == "" {
		t.Fatalf("%s: no span", job)
	}
	var mine []otlpsink.Span
	ids := map[string]otlpsink.Span{}
	for _, s := range spans {
		if s.TraceID != trace {
			if s.Attrs["tribunal.job"] == job {
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
	byName := func(name string) otlpsink.Span {
		t.Helper()
		for _, s := range mine {
			if s.Name == name {
				return s
			}
		}
		var names []string
		for _, s := range mine {
			names = append(names, s.Name)
		}
		t.Fatalf("%s: no span %q among %q", job, name, names)
		return otlpsink.Span{}
	}
	renderer := byName("renderer render.requested")
	gater := byName("gater render.done")
	judge := byName("judge gates.done")
	agg := byName("aggregator verdict.emitted")
	byName("aggregator job.submitted")
	if gater.ParentSpanID != renderer.SpanID || judge.ParentSpanID != gater.SpanID || agg.ParentSpanID != judge.SpanID {
		t.Errorf("%s: chain renderer %s <- gater (parent %s) %s <- judge (parent %s) %s <- aggregator (parent %s)",
			job, renderer.SpanID, gater.ParentSpanID, gater.SpanID, judge.ParentSpanID, judge.SpanID, agg.ParentSpanID)
	}
	for _, s := range []otlpsink.Span{renderer, gater, judge, agg} {
		for k, v := range map[string]string{"messaging.system": "nats", "messaging.operation.type": "process", "messaging.message.id": s.Attrs["tribunal.event.id"]} {
			if s.Attrs[k] != v || v == "" {
				t.Errorf("%s: span %q: %s = %q, want %q", job, s.Name, k, s.Attrs[k], v)
			}
		}
		if !strings.HasPrefix(s.Attrs["messaging.destination.name"], "tribunal.default.") || s.Attrs["messaging.consumer.group.name"] == "" {
			t.Errorf("%s: span %q: destination %q, consumer group %q", job, s.Name, s.Attrs["messaging.destination.name"], s.Attrs["messaging.consumer.group.name"])
		}
		if s.Kind != "SPAN_KIND_CONSUMER" {
			t.Errorf("%s: span %q kind %s", job, s.Name, s.Kind)
		}
	}
	var genai []otlpsink.Span
	for _, s := range mine {
		if s.Attrs["gen_ai.operation.name"] == "chat" && s.ParentSpanID == judge.SpanID {
			genai = append(genai, s)
		}
	}
	if len(genai) == 0 {
		t.Fatalf("%s: no gen_ai span under the judge's span", job)
	}
	g := genai[0]
	for k, v := range map[string]string{"gen_ai.provider.name": "scripted", "gen_ai.system": "scripted", "tribunal.judge.kind": kind,
		"gen_ai.usage.input_tokens": "0", "gen_ai.usage.output_tokens": "0", "tribunal.tenant": "default"} {
		if g.Attrs[k] != v {
			t.Errorf("%s: gen_ai span %s = %q, want %q", job, k, g.Attrs[k], v)
		}
	}
	if m := g.Attrs["gen_ai.request.model"]; m == "" || g.Attrs["gen_ai.response.model"] == "" || g.Name != "chat "+m {
		t.Errorf("%s: gen_ai span %q: request model %q, response model %q", job, g.Name, m, g.Attrs["gen_ai.response.model"])
	}
	if g.Kind != "SPAN_KIND_CLIENT" || g.Error || g.Attrs["gen_ai.request.temperature"] != "0" {
		t.Errorf("%s: gen_ai span kind %s error %v temperature %q", job, g.Kind, g.Error, g.Attrs["gen_ai.request.temperature"])
	}
	if kind == "equivalence" {
		var runner bool
		for _, s := range mine {
			runner = runner || (s.Attrs["gen_ai.operation.name"] == "chat" && s.ParentSpanID == renderer.SpanID && s.Attrs["tribunal.judge.kind"] == "runner")
		}
		if !runner {
			t.Errorf("%s: no runner gen_ai span under the renderer's span", job)
		}
	}
	return mine
}
