package openai

import (
	"context"
	"encoding/json"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestResponseReportsWhatWasSent: every answer reports the sampling that went on the wire
// for the attempt that answered (the JSON-mode fallback included) and the model id the
// server reported, so a verdict records how it was sampled rather than what was
// configured.
func TestResponseReportsWhatWasSent(t *testing.T) {
	s := newServer(t, fakellm.Options{Respond: func(req goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if req.ResponseFormat != nil && req.ResponseFormat.Type == goopenai.ChatCompletionResponseFormatTypeJSONSchema {
			return fakellm.Reply{Status: 400, Content: "response_format json_schema is not supported"}
		}
		return fakellm.Reply{Model: "judge-model-2026-01-01"}
	}})
	p := newProvider(t, s, func(c *Config) { c.MaxTokens = 900 })
	req := simpleRequest()
	req.Params.Temperature = ptr[float32](0)
	req.Params.Seed = ptr(7)
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Sampling
	if !got.Pinned() {
		t.Fatalf("temperature 0 reported as unpinned: %v", &got)
	}
	if *got.Temperature != 0 || got.Seed == nil || *got.Seed != 7 || got.MaxTokens != 900 ||
		got.ResponseFormat != events.FormatJSONObject || got.ReportedModel != "judge-model-2026-01-01" {
		t.Errorf("sampling %v, want temperature 0, seed 7, max tokens 900, json_object after the fallback, the reported model", &got)
	}
	// What was reported is what the server received.
	var body map[string]json.RawMessage
	recs := s.Records()
	if err := json.Unmarshal(recs[len(recs)-1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if string(body["temperature"]) != "0" || string(body["seed"]) != "7" || string(body["max_tokens"]) != "900" {
		t.Errorf("wire body temperature %s seed %s max_tokens %s", body["temperature"], body["seed"], body["max_tokens"])
	}

	// No temperature pinned, no limit, a server that reports no model, no schema.
	s2 := newServer(t, fakellm.Options{Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{RawBody: `{"id":"x","object":"chat.completion","model":"","choices":[{"index":0,"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}]}`}
	}})
	p2 := newProvider(t, s2, func(c *Config) { c.MaxTokens = -1 })
	req = simpleRequest()
	req.Schema = nil
	resp, err = p2.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got = resp.Sampling
	if got.Pinned() || got.Seed != nil || got.MaxTokens != 0 || got.ResponseFormat != events.FormatNone || got.ReportedModel != "" {
		t.Errorf("sampling %v, want unpinned, no seed, no limit, none, no reported model", &got)
	}
	if resp.Model != "judge-model" {
		t.Errorf("response model %q, want the model asked for when the server reports none", resp.Model)
	}
	if got.String() != "temperature not pinned, no max tokens, none" {
		t.Errorf("String() = %q", got.String())
	}
}
