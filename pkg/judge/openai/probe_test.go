package openai

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

func probe(t *testing.T, p *Provider) *ProbeError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Probe(ctx)
	if err == nil {
		return nil
	}
	var pe *ProbeError
	if !errors.As(err, &pe) {
		t.Fatalf("Probe error %T %v, want a *ProbeError", err, err)
	}
	return pe
}

// TestProbeKey: the probe lists the models with the configured key; a server that
// refuses the key (none given, or the wrong one) is a failure that says so in full and
// that no retry fixes.
func TestProbeKey(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{APIKey: "sk-right-key-1234"})
	if pe := probe(t, newProvider(t, s, func(c *Config) { c.APIKey = "sk-right-key-1234" })); pe != nil {
		t.Fatalf("right key: %v", pe)
	}
	if s.ModelListings() != 1 || s.Calls() != 0 {
		t.Errorf("%d listings and %d completions, want one listing only", s.ModelListings(), s.Calls())
	}
	for key, want := range map[string]string{
		"":                  "the server refused the key: HTTP 401: You didn't provide an API key",
		"sk-wrong-key-9999": "the server refused the key: HTTP 401: Incorrect API key provided: sk-*****9999",
	} {
		pe := probe(t, newProvider(t, s, func(c *Config) { c.APIKey = key }))
		if pe == nil || pe.Status != 401 || pe.Retryable || !strings.Contains(pe.Error(), want) || !strings.Contains(pe.Error(), "GET "+s.BaseURL()+"/models") {
			t.Errorf("key %q: %v, want a permanent 401 with %q", key, pe, want)
		}
	}
}

// TestProbeNeedsKey: OpenAI's and Azure's endpoints need a key; without one the probe
// fails before any request. A local server with no key set needs none.
func TestProbeNeedsKey(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{BaseURL: DefaultBaseURL, Model: "m"},
		{Model: "m"},
		{BaseURL: "https://res.openai.azure.com", Azure: true, Model: "dep"},
	} {
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pe := probe(t, p)
		if pe == nil || pe.Retryable || !strings.Contains(pe.Error(), "no API key") {
			t.Errorf("%+v: %v, want no API key", cfg, pe)
		}
	}
	local := newServer(t, fakellm.Options{})
	if pe := probe(t, newProvider(t, local, func(c *Config) { c.APIKey = "" })); pe != nil {
		t.Errorf("local server without a key: %v", pe)
	}
}

// TestProbeAzure: Azure's model list lives under /openai/models with an api-version.
func TestProbeAzure(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{APIKey: "azure-key"})
	p := newProvider(t, s, func(c *Config) { c.BaseURL, c.Azure, c.APIKey = s.URL(), true, "azure-key" })
	if pe := probe(t, p); pe != nil || s.ModelListings() != 1 {
		t.Fatalf("azure: %v (%d listings)", pe, s.ModelListings())
	}
	p = newProvider(t, s, func(c *Config) { c.BaseURL, c.Azure, c.APIKey = s.URL(), true, "other" })
	if pe := probe(t, p); pe == nil || pe.Status != 401 {
		t.Fatalf("azure with a wrong key: %v", pe)
	}
}

// TestProbeUnreachable: nothing listening is a failure naming the address; a later probe
// may pass.
func TestProbeUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, err := New(Config{BaseURL: "http://" + addr + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	pe := probe(t, p)
	if pe == nil || !pe.Retryable || pe.Status != 0 || !strings.Contains(pe.Error(), "server not reachable") || !strings.Contains(pe.Error(), addr) {
		t.Fatalf("%v, want a retryable unreachable failure naming %s", pe, addr)
	}
}

// TestProbeWithoutModelList: a server that serves no model list gets a one-token
// completion of the configured model, with the key.
func TestProbeWithoutModelList(t *testing.T) {
	t.Parallel()
	var reply fakellm.Reply
	s := newServer(t, fakellm.Options{APIKey: "k", NoModels: true, Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply { return reply }})
	if pe := probe(t, newProvider(t, s, func(c *Config) { c.APIKey = "k" })); pe != nil {
		t.Fatalf("right key: %v", pe)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].MaxTokens != 1 || reqs[0].Model != "judge-model" {
		t.Fatalf("probe completions %+v, want one of judge-model with max_tokens 1", reqs)
	}
	if pe := probe(t, newProvider(t, s, func(c *Config) { c.APIKey = "wrong" })); pe == nil || pe.Status != 401 || !strings.Contains(pe.Error(), "one-token completion of model judge-model") {
		t.Errorf("wrong key: %v", pe)
	}
	for _, tc := range []struct {
		reply     fakellm.Reply
		ok        bool
		retryable bool
	}{
		{fakellm.Reply{Status: http.StatusNotFound, Content: "The model `judge-model` does not exist"}, false, false},
		{fakellm.Reply{Status: http.StatusServiceUnavailable}, false, true},
		{fakellm.Reply{Status: http.StatusTooManyRequests}, true, false},
		{fakellm.Reply{Status: http.StatusTooManyRequests, Content: "You exceeded your current quota", ErrorCode: "insufficient_quota"}, false, false},
		{fakellm.Reply{Status: http.StatusBadRequest, Content: "max_tokens is too small"}, true, false},
	} {
		reply = tc.reply
		pe := probe(t, newProvider(t, s, func(c *Config) { c.APIKey = "k" }))
		if (pe == nil) != tc.ok || (pe != nil && (pe.Retryable != tc.retryable || pe.Status != tc.reply.Status)) {
			t.Errorf("answer %d %q: %v, want ok=%v retryable=%v", tc.reply.Status, tc.reply.Content, pe, tc.ok, tc.retryable)
		}
	}
}
