package judge

import (
	"context"
	"errors"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Instrumented wraps p so that every Complete is a GenAI client span and a provider-call
// measurement (pkg/telemetry.StartProviderCall): model, tokens, outcome and duration,
// for every kind, the repair re-ask and the renderer's runner alike. app.Start wraps each
// process's provider once, outside judge.Limited, so the wait for shared rate limits is
// part of the call as its caller lives it.
func Instrumented(p Provider) Provider {
	return &instrumentedProvider{Provider: p}
}

type instrumentedProvider struct {
	Provider
}

// serverAddresser is implemented by providers that talk to an endpoint (pkg/judge/openai),
// for the span's server.address and server.port.
type serverAddresser interface {
	ServerAddress() (host string, port int)
}

func (p *instrumentedProvider) Complete(ctx context.Context, req Request) (Response, error) {
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
	if sa, ok := as[serverAddresser](p.Provider); ok {
		call.ServerAddress, call.ServerPort = sa.ServerAddress()
	}
	if r, ok := as[Recorded](p.Provider); ok {
		call.NoModel = r.AsksNoModel()
	}
	ctx, end := telemetry.StartProviderCall(ctx, call)
	resp, err := p.Provider.Complete(ctx, req)
	end(telemetry.ProviderResult{Model: resp.Model, InputTokens: resp.PromptTokens, OutputTokens: resp.CompletionTokens,
		Outcome: CallStatus(ctx, err), Err: err, ID: resp.ID, FinishReasons: resp.FinishReasons,
		MaxTokens: resp.Sampling.MaxTokens, Seed: resp.Sampling.Seed})
	return resp, err
}

// as finds the optional interface T on p or on a provider it wraps (Limited's): a wrapper
// would otherwise hide, say, the server address of the provider under the rate limits.
func as[T any](p Provider) (T, bool) {
	for p != nil {
		if t, ok := p.(T); ok {
			return t, true
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			break
		}
		p = u.Unwrap()
	}
	var zero T
	return zero, false
}

// CallStatus classifies how a provider call ended, for rate limiters and metrics: "ok",
// StatusRateLimited, "unavailable", "canceled" (the caller gave up: a shutdown) or
// "error" (a request the provider could not make).
func CallStatus(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrUnavailable) && RateLimited(err):
		return StatusRateLimited
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case ctx.Err() != nil:
		return "canceled"
	default:
		return "error"
	}
}
