package records

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/price"
)

// Costs is what a set of jobs' judge calls cost: in all, per judge ("provider/model"), per
// judge kind and per team, with the price tables the costs were computed with. Every
// reader that shows money (results.json, `tribunal report`, `tribunal view`) adds it up
// here, from the calls the verdicts recorded, so they cannot disagree.
//
// Its JSON lists the parts ({"judge": "openai/gpt-4o", "cost": {...}}, sorted by name)
// rather than keying objects by judge, kind or team names, which are not snake_case keys.
type Costs struct {
	Total    price.Sum            `json:"total"`
	ByJudge  map[string]price.Sum `json:"-"`
	ByKind   map[string]price.Sum `json:"-"`
	ByTenant map[string]price.Sum `json:"-"`
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

// costsJSON is Costs' JSON form.
type costsJSON struct {
	Total         price.Sum   `json:"total"`
	ByJudge       []namedCost `json:"by_judge,omitempty"`
	ByKind        []namedCost `json:"by_kind,omitempty"`
	ByTenant      []namedCost `json:"by_tenant,omitempty"`
	PriceTables   []string    `json:"price_tables,omitempty"`
	BudgetRefused int         `json:"budget_refused,omitempty"`
}

// namedCost is one part of a Costs: exactly one of Judge, Kind and Tenant is set.
type namedCost struct {
	Judge  string    `json:"judge,omitempty"`
	Kind   string    `json:"kind,omitempty"`
	Tenant string    `json:"tenant,omitempty"`
	Cost   price.Sum `json:"cost"`
}

// MarshalJSON implements json.Marshaler.
func (c Costs) MarshalJSON() ([]byte, error) {
	list := func(m map[string]price.Sum, name func(*namedCost, string)) []namedCost {
		var out []namedCost
		for _, k := range slices.Sorted(maps.Keys(m)) {
			n := namedCost{Cost: m[k]}
			name(&n, k)
			out = append(out, n)
		}
		return out
	}
	return json.Marshal(costsJSON{Total: c.Total, PriceTables: c.PriceTables, BudgetRefused: c.BudgetRefused,
		ByJudge:  list(c.ByJudge, func(n *namedCost, k string) { n.Judge = k }),
		ByKind:   list(c.ByKind, func(n *namedCost, k string) { n.Kind = k }),
		ByTenant: list(c.ByTenant, func(n *namedCost, k string) { n.Tenant = k })})
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *Costs) UnmarshalJSON(data []byte) error {
	var j costsJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*c = Costs{Total: j.Total, PriceTables: j.PriceTables, BudgetRefused: j.BudgetRefused}
	for _, n := range j.ByJudge {
		add(&c.ByJudge, n.Judge, n.Cost)
	}
	for _, n := range j.ByKind {
		add(&c.ByKind, n.Kind, n.Cost)
	}
	for _, n := range j.ByTenant {
		add(&c.ByTenant, n.Tenant, n.Cost)
	}
	return nil
}
