package judge

import (
	"context"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// ErrBudgetExhausted is what a budget's wrapper returns for a call it did not make: the
// call's estimate would take the batch's or the team's spending past its budget. Ask
// records it on the usage (BudgetRefused) and the rules block the job with it.
var ErrBudgetExhausted = errclass.New(errclass.Refused, "budget exhausted")

// Priced wraps p so that every answer carries its cost at table's prices (Response.Cost,
// Priced, PriceTable). The model priced is the one asked (the provider's default when the
// request names none), not the snapshot the server reports, since that is what the table
// lists and what a budget reserved for.
func Priced(p Provider, table *price.Table) Provider {
	return &pricedProvider{Provider: p, table: table, version: table.Version()}
}

type pricedProvider struct {
	Provider
	table   *price.Table
	version string
}

// Unwrap is the provider the prices wrap.
func (p *pricedProvider) Unwrap() Provider { return p.Provider }

// PriceOf is the price of the model a request to p asks, false when it is unpriced.
func (p *pricedProvider) PriceOf(model string) (price.Price, bool) {
	if model == "" {
		model = p.DefaultModel()
	}
	return p.table.Lookup(p.Name(), model)
}

// Prices is the table the provider prices with.
func (p *pricedProvider) Prices() *price.Table { return p.table }

func (p *pricedProvider) Complete(ctx context.Context, req Request) (Response, error) {
	resp, err := p.Provider.Complete(ctx, req)
	resp.PriceTable = p.version
	if pr, ok := p.PriceOf(req.Model); ok {
		resp.Priced = true
		resp.Cost = pr.Cost(price.Usage{PromptTokens: resp.PromptTokens, CachedPromptTokens: resp.CachedPromptTokens,
			CompletionTokens: resp.CompletionTokens, Batch: resp.Batch})
	}
	return resp, err
}

// Pricer is a provider that prices its calls (Priced), found with Find under other
// wrappers: a budget reserves by its prices.
type Pricer interface {
	PriceOf(model string) (price.Price, bool)
	Prices() *price.Table
}
