package judge

import (
	"context"
	"fmt"
)

// Limiter is a rate limit shared by every process that calls a provider (judges, and
// renderers running equivalence documents). Wait is called before every provider call,
// repair re-asks included; Done exactly once after each call Wait let through, with the
// tokens the provider reported and the call's status: "ok", "unavailable",
// StatusRateLimited or "error". Done must not block for long.
type Limiter interface {
	Wait(ctx context.Context, tenant, provider, model string) error
	Done(ctx context.Context, tenant, provider, model string, promptTokens, completionTokens int, status string)
}

// StatusRateLimited is the status Done gets for a call that failed on HTTP 429, so the
// limiter can slow every instance down. Providers retry 429s themselves and then return
// an error wrapping ErrUnavailable and a *StatusError (RateLimited).
const StatusRateLimited = "rate_limited"

// tenantKey carries the tenant whose work a call is for down to the limited provider,
// which sees only requests.
type tenantKey struct{}

// WithTenant marks ctx as working for tenant, so a Limited provider charges the calls
// made under it to that tenant's budget.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantOf is the tenant WithTenant marked ctx with, "" when none.
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// Limited wraps p so that every Complete waits for l first and settles with it after.
// Wrapping the provider, rather than each call site, covers every kind and the repair
// re-ask alike.
func Limited(p Provider, l Limiter) Provider {
	return &limitedProvider{Provider: p, lim: l}
}

type limitedProvider struct {
	Provider
	lim Limiter
}

// Unwrap is the provider the limits wrap, for the optional interfaces it implements
// (instrument.Provider reads its server address).
func (p *limitedProvider) Unwrap() Provider { return p.Provider }

func (p *limitedProvider) Complete(ctx context.Context, req Request) (Response, error) {
	tenant, _ := ctx.Value(tenantKey{}).(string)
	model := req.Model
	if model == "" {
		model = p.DefaultModel()
	}
	if err := p.lim.Wait(ctx, tenant, p.Name(), model); err != nil {
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		// The call did not happen; the AC gets the reason rather than a silent pass.
		return Response{}, fmt.Errorf("%w: rate limit: %w", ErrUnavailable, err)
	}
	resp, err := p.Provider.Complete(ctx, req)
	status := CallStatus(ctx, err)
	if status == "canceled" {
		status = "error"
	}
	p.lim.Done(ctx, tenant, p.Name(), model, resp.PromptTokens, resp.CompletionTokens, status)
	return resp, err
}

// scopeKey carries the identity of the step a call is made for down to a provider that
// must name its calls deterministically (pkg/judge/batchmode).
type scopeKey struct{}

// WithScope marks ctx as making the calls of one pipeline step, named by scope: the
// judge service passes the gated event's id, which is the same on every redelivery of
// that event and differs between iterations, redrive attempts and rejudges. A provider
// that must not make the same call twice (the batch mode) names each call by its scope
// and what it asks.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeOf is the scope WithScope set on ctx, "" when none was.
func ScopeOf(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}
