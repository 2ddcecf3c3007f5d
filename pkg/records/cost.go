package records

import (
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/price"
)

// Costs is what a set of jobs' judge calls cost: in all, per judge ("provider/model"), per
// judge kind and per team, with the price tables the costs were computed with. Every
// reader that shows money (results.json, `tribunal report`, `tribunal view`) adds it up
// here, from the calls the verdicts recorded, so they cannot disagree.
type Costs struct {
	Total    price.Sum            `json:"total"`
	ByJudge  map[string]price.Sum `json:"by_judge,omitempty"`
	ByKind   map[string]price.Sum `json:"by_kind,omitempty"`
	ByTenant map[string]price.Sum `json:"by_tenant,omitempty"`
	// PriceTables are the versions of the price tables the calls were priced with
	// (pkg/price.Table.Version), sorted; more than one means the prices changed between
	// the calls.
	PriceTables []string `json:"price_tables,omitempty"`
	// BudgetRefused counts the calls a budget refused (never made, costing nothing).
	BudgetRefused int `json:"budget_refused,omitempty"`
}

// Add adds j's calls.
func (c *Costs) Add(j *Job) {
	for _, call := range j.Calls {
		if call.BudgetRefused != "" {
			c.BudgetRefused++
			continue
		}
		s := call.Cost()
		c.Total.Add(s)
		add(&c.ByJudge, call.Judge, s)
		add(&c.ByKind, string(j.Spec.Kind), s)
		add(&c.ByTenant, j.Tenant, s)
		if call.PriceTable != "" && !slices.Contains(c.PriceTables, call.PriceTable) {
			c.PriceTables = append(c.PriceTables, call.PriceTable)
			slices.Sort(c.PriceTables)
		}
	}
}

func add(m *map[string]price.Sum, key string, s price.Sum) {
	if *m == nil {
		*m = map[string]price.Sum{}
	}
	v := (*m)[key]
	v.Add(s)
	(*m)[key] = v
}

// CostsOf adds up jobs' costs.
func CostsOf(jobs []*Job) Costs {
	var c Costs
	for _, j := range jobs {
		c.Add(j)
	}
	return c
}
