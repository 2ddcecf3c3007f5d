package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// priceFlags choose the prices calls are costed at and, on a shared deployment, the
// teams' budgets.
type priceFlags struct {
	table         string
	prices        []string
	tenantBudgets []string
}

func (p *priceFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.table, "price-table", "", "price table file (YAML or JSON, the shape of pkg/price/prices.yaml) in place of the shipped list prices")
	fs.StringSliceVar(&p.prices, "price", nil, "a model's price over the table, USD per million tokens: [provider/]model=input/cached/output[/batch discount %] (repeatable)")
}

// registerBudgets adds the teams' budgets, for the commands that serve teams.
func (p *priceFlags) registerBudgets(fs *pflag.FlagSet) {
	fs.StringSliceVar(&p.tenantBudgets, "tenant-budget", nil, "judge, renderer: a team's budget per period, shared by every judge instance: team=<limit>/<period> (\"team-a=50 USD/month\", \"*=200k tokens/day\" for every other team); past it no call is made (repeatable)")
}

// tableOf is the effective price table: the file or the shipped one, with --price over it.
func (p *priceFlags) tableOf() (*price.Table, error) {
	t := price.Default()
	if p.table != "" {
		var err error
		if t, err = price.Load(p.table); err != nil {
			return nil, fmt.Errorf("--price-table: %w", err)
		}
	}
	return t.With(p.prices)
}

// budgets are the teams' budgets, nil for none.
func (p *priceFlags) budgets() (map[string]budget.TenantBudget, error) {
	if len(p.tenantBudgets) == 0 {
		return nil, nil
	}
	return budget.ParseTenantBudgets(p.tenantBudgets)
}
