package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// ProbeError is why a provider cannot work, found before any work was given to it.
type ProbeError struct {
	// Status is the HTTP status of the server's answer, 0 when none came.
	Status int
	// Retryable says a later probe may pass without a configuration change: the server
	// was unreachable, overloaded or slow. False means the key, the URL or the model is
	// wrong.
	Retryable bool
	msg       string
	err       error
}

func (e *ProbeError) Error() string { return e.msg }

func (e *ProbeError) Unwrap() error { return e.err }

// NeedsKey reports whether cfg's endpoint is known to refuse requests without an API
// key: OpenAI's own API and Azure OpenAI. Local servers (Ollama, vLLM, llama.cpp) and
// unknown endpoints may take none; the probe finds out.
func NeedsKey(cfg Config) bool {
	if cfg.Azure {
		return true
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return host == "api.openai.com" || strings.HasSuffix(host, ".openai.azure.com") || strings.HasSuffix(host, ".cognitiveservices.azure.com")
}

// Probe checks with one cheap request that the provider can work: that there is a key
// where the endpoint needs one, that the server answers, and that it accepts the key. It
// lists the models (GET /models, which costs nothing); a server that does not serve the
// list is asked for a one-token completion of the configured model instead. A 429 means
// the key was accepted (unless the account has no quota left). The error, a
// *ProbeError, says why not in full. ctx bounds the probe; it makes one attempt.
func (p *Provider) Probe(ctx context.Context) error {
	if p.cfg.APIKey == "" && NeedsKey(p.cfg) {
		return &ProbeError{msg: fmt.Sprintf("%s: no API key, and %s needs one", p.label(), p.cfg.BaseURL)}
	}
	info := &attemptInfo{}
	_, err := p.client.ListModels(context.WithValue(ctx, attemptKey{}, info))
	what := "GET " + strings.TrimRight(p.cfg.BaseURL, "/") + "/models"
	if err == nil {
		return nil
	}
	f := classify(err, info, false, 0)
	switch f.status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		// No model list here: ask the model itself for one token.
		return p.probeCompletion(ctx)
	}
	return p.probeFailure(ctx, what, f)
}

// probeCompletion asks the configured model for a one-token completion.
func (p *Provider) probeCompletion(ctx context.Context) error {
	zero := float32(0)
	req, zeroTemp, err := buildRequest(p.cfg.Model, judge.Request{
		Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: "Reply with OK."}}}},
		Params:   judge.Params{Temperature: &zero, MaxTokens: 1},
	}, 1)
	if err != nil {
		return &ProbeError{msg: fmt.Sprintf("%s: probe request: %v", p.label(), err), err: err}
	}
	_, f := p.attempt(ctx, req, zeroTemp)
	if f == nil || (f.status >= 200 && f.status < 300) {
		return nil
	}
	what := fmt.Sprintf("one-token completion of model %s", p.cfg.Model)
	switch {
	case f.status == http.StatusNotFound:
		// The chat endpoint is there (no model list was), so the model is not.
		return &ProbeError{Status: f.status, err: f.err, msg: fmt.Sprintf("%s: %s: HTTP %d: %s", p.label(), what, f.status, f.msg)}
	case f.status >= 400 && f.status < 500 && f.status != http.StatusUnauthorized && f.status != http.StatusForbidden && f.status != http.StatusTooManyRequests:
		// The server took the key and judged the request: a one-token answer may be
		// refused by a model that wants room to reason, which is no reason not to start.
		return nil
	}
	return p.probeFailure(ctx, what, f)
}

// probeFailure turns a failed probe request into a ProbeError, or nil for a 429 that
// shows the key was accepted.
func (p *Provider) probeFailure(ctx context.Context, what string, f *failure) error {
	if f.status == http.StatusTooManyRequests && !strings.Contains(strings.ToLower(f.msg+" "+apiCode(f.err)), "quota") {
		return nil
	}
	e := &ProbeError{Status: f.status, err: f.err}
	switch {
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden:
		e.msg = fmt.Sprintf("%s: %s: the server refused the key: HTTP %d: %s", p.label(), what, f.status, f.msg)
	case f.status == 0 && ctx.Err() != nil:
		e.msg, e.Retryable = fmt.Sprintf("%s: %s: no answer: %v", p.label(), what, ctx.Err()), true
	case f.status == 0:
		e.msg, e.Retryable = fmt.Sprintf("%s: %s: server not reachable: %s", p.label(), what, f.msg), true
	default:
		e.msg, e.Retryable = fmt.Sprintf("%s: %s: HTTP %d: %s", p.label(), what, f.status, f.msg), f.retryable && f.status != http.StatusTooManyRequests
	}
	return e
}

// apiCode is the error code of an OpenAI error body ("insufficient_quota"), if any.
func apiCode(err error) string {
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) && apiErr.Code != nil {
		return fmt.Sprint(apiErr.Code)
	}
	return ""
}
