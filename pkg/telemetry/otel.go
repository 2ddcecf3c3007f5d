package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TracingConfig names the process whose spans are exported.
type TracingConfig struct {
	// Service is the default service.name ("tribunal-judge", ...); OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it.
	Service string
	// Instance is service.instance.id (the pod or host name).
	Instance string
}

// SetupTracing installs the OpenTelemetry SDK as the global tracer provider when the
// standard OTEL_* environment variables ask for an exporter, and returns the function
// that flushes and shuts it down (call it before the process exits, or the last spans
// are lost). The variables are the SDK's own:
//
//   - OTEL_TRACES_EXPORTER: otlp, console or none. Unset, spans are exported over OTLP
//     when an endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and not at all otherwise;
//   - OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL): http/protobuf (default) or
//     grpc; OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, _INSECURE, _CERTIFICATE and
//     their _TRACES_ variants;
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on:
//     the decision taken at a trace's root, its submission, is followed by every service,
//     so a job is traced in every service or none);
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; OTEL_SDK_DISABLED=true turns it off.
//
// With no exporter nothing is installed: spans stay non-recording, and StartSpan still
// gives every handler a span id of its own, so trace context in events and logs is right.
func SetupTracing(ctx context.Context, cfg TracingConfig) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return none, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx, autoexport.WithFallbackSpanExporter(otlpIfEndpoint))
	if err != nil {
		return none, fmt.Errorf("traces exporter (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*): %w", err)
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		return none, nil
	}
	attrs := resource.WithAttributes(semconv.ServiceName(cfg.Service), semconv.ServiceVersion(Version()))
	opts := []resource.Option{attrs, resource.WithTelemetrySDK(), resource.WithFromEnv()}
	if cfg.Instance != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceInstanceID(cfg.Instance)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return none, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// otlpIfEndpoint is the exporter when OTEL_TRACES_EXPORTER is unset: OTLP over the
// configured protocol if an OTLP endpoint is set, else none (nil).
func otlpIfEndpoint(ctx context.Context) (sdktrace.SpanExporter, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", proto)
}
