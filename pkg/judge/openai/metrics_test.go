package openai

import (
	"context"
	"net/http"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/judge/instrument"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// TestRetriesAnd429sCounted: every repeated attempt counts under its reason and every
// 429 answer counts, retried or final; through instrument.Provider the call counts once
// with its outcome and the endpoint it went to.
//
// Not parallel: the counters are the process's, and a parallel test's calls through the
// provider would be counted with these.
func TestRetriesAnd429sCounted(t *testing.T) {
	m := telemetry.Reset()
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		switch n {
		case 1:
			return fakellm.Reply{Status: 429, Header: http.Header{"Retry-After-Ms": {"5"}}}
		case 2:
			return fakellm.Reply{Status: 503}
		case 3:
			return fakellm.Reply{}
		}
		return fakellm.Reply{Status: 429, Header: http.Header{"Retry-After-Ms": {"5"}}}
	}})
	p := instrument.Provider(newProvider(t, s, func(c *Config) { c.MaxAttempts = 3 }))
	if _, err := p.Complete(context.Background(), simpleRequest()); err != nil {
		t.Fatal(err)
	}
	// Calls 4 to 6 are 429s: two retries, then the provider gives up.
	if _, err := p.Complete(context.Background(), simpleRequest()); err == nil {
		t.Fatal("three 429s with MaxAttempts 3 succeeded")
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tribunal_provider_retries_total", []string{"provider=openai", "model=judge-model", "reason=rate_limited"}, 3},
		{"tribunal_provider_retries_total", []string{"reason=server_error"}, 1},
		{"tribunal_provider_retries_total", nil, 4},
		{"tribunal_provider_rate_limited_total", []string{"provider=openai", "model=judge-model"}, 4},
		{"tribunal_provider_calls_total", []string{"outcome=ok", "tenant=other"}, 1},
		{"tribunal_provider_calls_total", []string{"outcome=rate_limited"}, 1},
		{"tribunal_provider_call_duration_seconds", []string{"provider=openai", "kind=ab"}, 2},
	} {
		if got := m.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestServerAddress(t *testing.T) {
	t.Parallel()
	for base, want := range map[string]struct {
		host string
		port int
	}{
		"https://api.openai.com/v1": {"api.openai.com", 443},
		"http://localhost:11434/v1": {"localhost", 11434},
		"http://vllm.models.svc/v1": {"vllm.models.svc", 80},
	} {
		p, err := New(Config{BaseURL: base, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if h, port := p.ServerAddress(); h != want.host || port != want.port {
			t.Errorf("%s: %s:%d, want %s:%d", base, h, port, want.host, want.port)
		}
	}
}
