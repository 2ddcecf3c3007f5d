// Package otlpsink is an in-process OTLP trace receiver for tests: it accepts spans over
// OTLP/HTTP (protobuf) and OTLP/gRPC exactly as a collector would, decoding them with the
// protocol's own generated types (go.opentelemetry.io/proto/otlp), and keeps them for
// the test to inspect.
package otlpsink

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	// Service is the span's resource's service.name.
	Service      string
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	// Kind is the OTLP span kind ("SPAN_KIND_CONSUMER", ...).
	Kind string
	// Attrs are the span's attributes as strings (ints and floats formatted).
	Attrs map[string]string
	// Error says the span's status is an error.
	Error bool
}

// Sink collects spans.
type Sink struct {
	mu    sync.Mutex
	spans []Span
}

// Spans returns a copy of every span received so far.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

func (s *Sink) add(req *collectortrace.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, Span{
					Service: service, Name: sp.GetName(), TraceID: hex.EncodeToString(sp.GetTraceId()),
					SpanID: hex.EncodeToString(sp.GetSpanId()), ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
					Kind: sp.GetKind().String(), Attrs: attrs(sp.GetAttributes()), Error: sp.GetStatus().GetCode() == 2,
				})
			}
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetDoubleValue())
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// StartHTTP serves OTLP/HTTP on a loopback port until the test ends and returns the sink
// and the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT ("http://127.0.0.1:port"; the
// exporter appends /v1/traces).
func StartHTTP(t testing.TB) (*Sink, string) {
	t.Helper()
	s := &Sink{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.add(&req)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s, "http://" + ln.Addr().String()
}

// StartGRPC serves OTLP/gRPC on a loopback port until the test ends and returns the
// sink and the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT (with
// OTEL_EXPORTER_OTLP_INSECURE=true: the receiver has no TLS).
func StartGRPC(t testing.TB) (*Sink, string) {
	t.Helper()
	s := &Sink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, grpcService{sink: s})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return s, "http://" + ln.Addr().String()
}

type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	sink *Sink
}

func (g grpcService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.sink.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// RecordGlobal installs a tracer provider that keeps every span in memory as otel's
// global one for the test, restoring the previous provider at cleanup, and returns its
// exporter. Tests that use it change process-wide state and must not run in parallel.
func RecordGlobal(t testing.TB) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}
