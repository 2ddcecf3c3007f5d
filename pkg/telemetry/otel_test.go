package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// clearOTEL unsets every OTEL_* variable the tests below read, restoring the global
// tracer provider afterwards.
func clearOTEL(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_EXPORTER_OTLP_INSECURE"} {
		t.Setenv(k, "")
	}
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
}

func installed() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// TestSetupTracingNoneWhenUnset: without OTEL_* configuration (or with the exporter
// "none", or the SDK disabled) nothing is installed and nothing is sent anywhere.
func TestSetupTracingNoneWhenUnset(t *testing.T) {
	for _, env := range [][2]string{{}, {"OTEL_TRACES_EXPORTER", "none"}, {"OTEL_SDK_DISABLED", "true"}} {
		clearOTEL(t)
		if env[0] != "" {
			t.Setenv(env[0], env[1])
		}
		if env[0] == "OTEL_SDK_DISABLED" {
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
		}
		shutdown, err := telemetry.SetupTracing(context.Background(), telemetry.TracingConfig{Service: "tribunal-judge"})
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if installed() {
			t.Errorf("%v: an SDK was installed", env)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func TestSetupTracingRejectsUnknownProtocol(t *testing.T) {
	for _, env := range [][2]string{{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json-ish"}, {"OTEL_TRACES_EXPORTER", "zipkin-maybe"}} {
		clearOTEL(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
		t.Setenv(env[0], env[1])
		if _, err := telemetry.SetupTracing(context.Background(), telemetry.TracingConfig{Service: "x"}); err == nil {
			t.Errorf("%s=%s accepted", env[0], env[1])
		}
	}
}

// TestSetupTracingExportsAndHonoursEnv: an endpoint alone selects OTLP (HTTP by
// default, gRPC by OTEL_EXPORTER_OTLP_PROTOCOL or OTEL_TRACES_EXPORTER=otlp with the
// protocol), the resource carries OTEL_SERVICE_NAME, shutdown flushes, and the sampler
// variables are the SDK's.
func TestSetupTracingExportsAndHonoursEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		grpc     bool
		exporter string
		service  string
		sampler  string
		want     string // service.name; "" when nothing may arrive
	}{
		{name: "http by endpoint", want: "tribunal-judge"},
		{name: "grpc by protocol", grpc: true, service: "judges-eu", want: "judges-eu"},
		{name: "otlp named", exporter: "otlp", grpc: true, want: "tribunal-judge"},
		{name: "sampled out", sampler: "always_off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearOTEL(t)
			var sink *otlpsink.Sink
			var endpoint string
			if tc.grpc {
				sink, endpoint = otlpsink.StartGRPC(t)
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
				t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			} else {
				sink, endpoint = otlpsink.StartHTTP(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_TRACES_EXPORTER", tc.exporter)
			t.Setenv("OTEL_SERVICE_NAME", tc.service)
			t.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
			shutdown, err := telemetry.SetupTracing(context.Background(), telemetry.TracingConfig{Service: "tribunal-judge", Instance: "judge-0"})
			if err != nil {
				t.Fatal(err)
			}
			if !installed() {
				t.Fatal("no SDK installed")
			}
			_, span := telemetry.StartSpan(context.Background(), "work", trace.WithSpanKind(trace.SpanKindConsumer))
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := sink.Spans()
			if tc.want == "" {
				if len(spans) != 0 {
					t.Fatalf("sampled-out span exported: %v", spans)
				}
				return
			}
			if len(spans) != 1 || spans[0].Name != "work" || spans[0].Service != tc.want {
				t.Fatalf("received %+v, want one span \"work\" of %s", spans, tc.want)
			}
		})
	}
}
