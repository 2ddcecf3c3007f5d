package openai

import (
	"context"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/instrument"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
)

// TestGenAISpanDescribesTheCall: a call through instrument.Provider, under the shared rate
// limits as app.Start wraps it, is a GenAI client span with the response's id and finish
// reasons, the token limit and seed the provider sent (its default limit for a request
// that set none) and the endpoint, which the limits' wrapper no longer hides. Not
// parallel: it installs a global tracer provider.
func TestGenAISpanDescribesTheCall(t *testing.T) {
	exp := otlpsink.RecordGlobal(t)
	s := newServer(t, fakellm.Options{})
	_, js := natstest.Start(t).Connect(t)
	lim, err := ratelimit.New(context.Background(), js, ratelimit.Limits{RequestsPerMinute: 6000})
	if err != nil {
		t.Fatal(err)
	}
	p := instrument.Provider(judge.Limited(newProvider(t, s, nil), lim.ForJudge()))
	req := simpleRequest()
	seed := 7
	req.Params.Seed = &seed
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	attrs := map[string]string{}
	for _, a := range spans[0].Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	host, port := newProvider(t, s, nil).ServerAddress()
	for k, v := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "judge-model",
		"gen_ai.response.id": "chatcmpl-fake-1", "gen_ai.response.finish_reasons": `["stop"]`,
		"gen_ai.request.max_tokens": "4096", "gen_ai.request.seed": "7", "server.address": host,
	} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if attrs["server.port"] == "" || attrs["server.port"] == "0" || port == 0 {
		t.Errorf("server.port %q", attrs["server.port"])
	}
}
