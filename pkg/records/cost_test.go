package records_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestCallCost: what each kind of call record costs, as every reader adds it up.
func TestCallCost(t *testing.T) {
	for _, c := range []struct {
		name string
		call records.Call
		want price.Sum
	}{
		{"priced", records.Call{Priced: true, CostNanos: 1500, PromptTokens: 10, CompletionTokens: 2, Status: events.VoteOK}, price.Sum{Cost: 1500, Priced: 1, PromptTokens: 10, CompletionTokens: 2}},
		{"unpriced", records.Call{PromptTokens: 10, Status: events.VoteOK}, price.Sum{Unpriced: 1, PromptTokens: 10}},
		{"unpriced model", records.Call{Judge: "openai/my-local-model", PromptTokens: 10, Status: events.VoteOK}, price.Sum{Unpriced: 1, PromptTokens: 10}},
		{"recorded answers", records.Call{Judge: "scripted/scripted-ab", Priced: true, PromptTokens: 10, Status: events.VoteOK}, price.Sum{Priced: 1, Recorded: 1, PromptTokens: 10}},
		{"cache hit", records.Call{Cached: true, Priced: true, SavedNanos: 900, PromptTokens: 10, Status: events.VoteOK}, price.Sum{Priced: 1, CacheHits: 1, Saved: 900}},
		{"refused by a budget", records.Call{BudgetRefused: "budget exhausted: ...", Status: events.VoteUnavailable}, price.Sum{}},
		{"input refused", records.Call{Status: events.VoteBlocked}, price.Sum{}},
	} {
		if got := c.call.Cost(); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	j := &records.Job{Tenant: "a", Spec: events.JobSpec{Kind: events.KindAB}, Calls: []records.Call{
		{Judge: "openai/m", Priced: true, CostNanos: 100, Status: events.VoteOK}, {Judge: "openai/n", Status: events.VoteOK},
		{Judge: "openai/m", BudgetRefused: "budget exhausted: ...", Status: events.VoteUnavailable}}}
	cs := records.CostsOf([]*records.Job{j, j})
	if cs.Total.Cost != 200 || cs.Total.Unpriced != 2 || cs.ByJudge["openai/m"].Cost != 200 || cs.ByKind["ab"].Priced != 2 ||
		cs.ByTenant["a"].Unpriced != 2 || cs.BudgetRefused != 2 {
		t.Errorf("costs %+v", cs)
	}
}

// TestCostsJSON: the parts are listed by name (judge names are not snake_case keys) and
// read back as they were.
func TestCostsJSON(t *testing.T) {
	j := &records.Job{Tenant: "team-a", Spec: events.JobSpec{Kind: events.KindAB}, Calls: []records.Call{
		{Judge: "openai/gpt-4o", Priced: true, CostNanos: 100, PriceTable: "prices-x", Status: events.VoteOK}}}
	c := records.CostsOf([]*records.Job{j})
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"by_judge":[{"judge":"openai/gpt-4o","cost":{`) {
		t.Errorf("JSON %s: want the judges listed", data)
	}
	var back records.Costs
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip %+v, %v; want %+v", back, err, c)
	}
}
