// Package instrument measures a judge provider's calls: each Complete is a GenAI client
// span and a provider-call measurement. It stands apart from pkg/judge so that the judge
// contract the kinds' rules read carries no telemetry (OpenTelemetry, Prometheus).
package instrument

import (
	"context"

	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Provider wraps p so that every Complete is a GenAI client span and a provider-call
// measurement (pkg/telemetry.StartProviderCall): model, tokens, outcome and duration,
// for every kind, the repair re-ask and the renderer's runner alike. app.Start wraps each
// process's provider once, outside judge.Limited, so the wait for shared rate limits is
// part of the call as its caller lives it.
func Provider(p judge.Provider) judge.Provider {
	return &instrumentedProvider{Provider: p}
}

type instrumentedProvider struct {
	judge.Provider
}

// Unwrap is the provider measured, for the optional interfaces it implements (a budget
// reads its prices).
func (p *instrumentedProvider) Unwrap() judge.Provider { return p.Provider }

// serverAddresser is implemented by providers that talk to an endpoint (pkg/judge/openai),
// for the span's server.address and server.port.
type serverAddresser interface {
	ServerAddress() (host string, port int)
}

// batchMode is implemented by a provider whose calls go through a batch API
// (pkg/judge/batchmode), for the calls' mode label.
type batchMode interface {
	BatchMode() bool
}

func (p *instrumentedProvider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	model := req.Model
	if model == "" {
		model = p.DefaultModel()
	}
	call := telemetry.ProviderCall{Provider: p.Name(), Model: model, Kind: req.Kind, MaxTokens: req.Params.MaxTokens,
		Seed: req.Params.Seed, Structured: req.Schema != nil}
	if t := req.Params.Temperature; t != nil {
		f := float64(*t)
		call.Temperature = &f
	}
	if sa, ok := judge.Find[serverAddresser](p.Provider); ok {
		call.ServerAddress, call.ServerPort = sa.ServerAddress()
	}
	if r, ok := judge.Find[judge.Recorded](p.Provider); ok {
		call.NoModel = r.AsksNoModel()
	}
	if b, ok := judge.Find[batchMode](p.Provider); ok && b.BatchMode() {
		call.Mode = telemetry.ModeBatch
	}
	ctx, end := telemetry.StartProviderCall(ctx, call)
	resp, err := p.Provider.Complete(ctx, req)
	end(telemetry.ProviderResult{Model: resp.Model, InputTokens: resp.PromptTokens, OutputTokens: resp.CompletionTokens,
		Outcome: judge.CallStatus(ctx, err), Err: err, ID: resp.ID, FinishReasons: resp.FinishReasons,
		MaxTokens: resp.Sampling.MaxTokens, Seed: resp.Sampling.Seed, Priced: resp.Priced, CostUSD: float64(resp.Cost) / price.NanosPerUSD})
	return resp, err
}
