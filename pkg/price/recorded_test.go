package price

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRecordedAnswers: the scripted judge's calls are priced at zero, whatever the table,
// and every reading of their cost says why; a real model with no price stays unpriced.
func TestRecordedAnswers(t *testing.T) {
	for _, table := range []*Table{Default(), {}, nil} {
		if p, ok := table.Lookup(ScriptedProvider, "any-model"); !ok || p != (Price{}) {
			t.Errorf("scripted in %v: %+v, %v; want priced at zero", table, p, ok)
		}
		if _, ok := table.Lookup("openai", "my-local-model"); ok {
			t.Errorf("an unknown model is priced in %v", table)
		}
	}
	s := Sum{Priced: 3, Recorded: 3}
	if got := s.String(); got != "0.00 USD (3 calls at 0: recorded answers, no provider asked)" {
		t.Errorf("String %q", got)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"recorded_calls":3,"recorded_reason":"recorded answers"`) || !strings.Contains(string(data), `"nano_usd":0`) {
		t.Errorf("JSON %s", data)
	}
	var back Sum
	if err := json.Unmarshal(data, &back); err != nil || back != s {
		t.Errorf("JSON round trip %+v, %v", back, err)
	}
	if got := (Sum{Unpriced: 2}).String(); got != "unpriced" {
		t.Errorf("an unpriced model's calls: %q, want unpriced", got)
	}
}
