package price

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCost(t *testing.T) {
	mini := Price{Input: 150, CachedInput: 75, Output: 600, BatchDiscountPercent: 50}
	for _, c := range []struct {
		name string
		p    Price
		u    Usage
		want Money
	}{
		{"nothing", mini, Usage{}, 0},
		{"prompt only", mini, Usage{PromptTokens: 1000}, 150_000},
		{"prompt and completion", mini, Usage{PromptTokens: 1234, CompletionTokens: 56}, 1234*150 + 56*600},
		{"cached part of the prompt", mini, Usage{PromptTokens: 1000, CachedPromptTokens: 400, CompletionTokens: 10}, 600*150 + 400*75 + 10*600},
		{"cached beyond the prompt is the prompt", mini, Usage{PromptTokens: 10, CachedPromptTokens: 50}, 10 * 75},
		{"batch halves", mini, Usage{PromptTokens: 1000, CompletionTokens: 100, Batch: true}, (1000*150 + 100*600) / 2},
		{"batch rounds half up", Price{Input: 1, BatchDiscountPercent: 50}, Usage{PromptTokens: 3, Batch: true}, 2},
		{"no discount on a batch call without one", Price{Input: 2500, Output: 10000}, Usage{PromptTokens: 1, CompletionTokens: 1, Batch: true}, 12500},
		{"a million gpt-4o tokens", Price{Input: 2500, Output: 10000}, Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}, 12_500_000_000},
	} {
		if got := c.p.Cost(c.u); got != c.want {
			t.Errorf("%s: cost %d, want %d", c.name, got, c.want)
		}
	}
}

func TestMoneyAndRates(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Money
		text string
	}{
		{"5.00 USD", 5 * NanosPerUSD, "5.00 USD"},
		{"$0.25", 250_000_000, "0.25 USD"},
		{"0.004215750", 4_215_750, "0.00421575 USD"},
		{"12 usd", 12 * NanosPerUSD, "12.00 USD"},
	} {
		m, err := ParseMoney(c.in)
		if err != nil || m != c.want || m.String() != c.text {
			t.Errorf("ParseMoney(%q) = %d (%s), %v; want %d (%s)", c.in, m, m, err, c.want, c.text)
		}
	}
	for _, bad := range []string{"", "5 EUR", "-1 USD", "0.0000000001", "abc USD"} {
		if _, err := ParseMoney(bad); err == nil {
			t.Errorf("ParseMoney(%q): want an error", bad)
		}
	}
	for in, want := range map[string]Rate{"2.50": 2500, "0.075": 75, "10": 10000, "0.005": 5} {
		if r, err := ParseRate(in); err != nil || r != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, r, err, want)
		}
	}
	if _, err := ParseRate("0.0375"); err == nil {
		t.Error("ParseRate(0.0375): want an error (a fraction of a nano-dollar per token)")
	}
	if got := Rate(2500).PerMillion(); got != "2.50" {
		t.Errorf("PerMillion = %s, want 2.50", got)
	}
}

func TestLimit(t *testing.T) {
	for in, want := range map[string]Limit{
		"5.00 USD": {Money: 5 * NanosPerUSD}, "$0.01": {Money: 10_000_000}, "200k tokens": {Tokens: 200_000},
		"1.5M tokens": {Tokens: 1_500_000}, "1234 tokens": {Tokens: 1234},
	} {
		if got, err := ParseLimit(in); err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0 USD", "0 tokens", "lots", "5 EUR", "-3 tokens"} {
		if _, err := ParseLimit(bad); err == nil {
			t.Errorf("ParseLimit(%q): want an error", bad)
		}
	}
}

func TestDefaultTable(t *testing.T) {
	d := Default()
	if d.Date == "" || !strings.HasPrefix(d.Source, "https://") {
		t.Errorf("default table: date %q, source %q: want both", d.Date, d.Source)
	}
	p, ok := d.Lookup("openai", "gpt-4o-mini")
	if !ok || p != (Price{Input: 150, CachedInput: 75, Output: 600, BatchDiscountPercent: 50}) {
		t.Errorf("gpt-4o-mini = %+v, %v", p, ok)
	}
	if q, ok := d.Lookup("openai", "gpt-4o-mini-2024-07-18"); !ok || q != p {
		t.Errorf("a dated snapshot = %+v, %v; want its family's price", q, ok)
	}
	if _, ok := d.Lookup("openai", "llama3:8b"); ok {
		t.Error("llama3:8b is priced: want unpriced")
	}
	if _, ok := d.Lookup("ollama", "gpt-4o"); ok {
		t.Error("another provider's gpt-4o is priced by openai's entry")
	}
	if d.Version() != Default().Version() || !strings.HasPrefix(d.Version(), "prices-") {
		t.Errorf("version %q is not stable", d.Version())
	}
}

func TestOverrides(t *testing.T) {
	d := Default()
	o, err := d.With([]string{"gpt-4o=3.00/1.50/12.00", "ollama/llama3=0.01/0/0.02/0", "openai/gpt-4o-mini=0.15/0.075/0.60"})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := o.Lookup("openai", "gpt-4o"); p.Input != 2500 {
		t.Errorf("openai's own gpt-4o entry is kept before the any-provider override: %+v", p)
	}
	if p, ok := o.Lookup("vllm", "gpt-4o"); !ok || p.Input != 3000 || p.Output != 12000 {
		t.Errorf("gpt-4o for any provider = %+v, %v", p, ok)
	}
	if p, ok := o.Lookup("ollama", "llama3"); !ok || p.Output != 20 {
		t.Errorf("ollama/llama3 = %+v, %v", p, ok)
	}
	if p, _ := o.Lookup("openai", "gpt-4o-mini"); p.BatchDiscountPercent != 50 {
		t.Errorf("an override naming no discount keeps the table's: %+v", p)
	}
	if o.Version() == d.Version() {
		t.Error("an override left the version as it was")
	}
	if same, _ := d.With([]string{"openai/gpt-4o-mini=0.15/0.075/0.60"}); same.Version() != d.Version() {
		t.Error("restating a price changed the version")
	}
	for _, bad := range []string{"gpt-4o", "gpt-4o=1/2", "=1/2/3", "m=1/2/3/150", "m=a/b/c"} {
		if _, err := d.With([]string{bad}); err == nil {
			t.Errorf("--price %q: want an error", bad)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.yaml")
	os.WriteFile(path, []byte("date: \"2026-01-01\"\nproviders:\n  openai:\n    models:\n      my-model: {input: 1, cached_input: 0.5, output: 2}\n"), 0o644)
	tb, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.Lookup("openai", "gpt-4o"); ok {
		t.Error("a file merged with the default: want it to replace the default")
	}
	if p, ok := tb.Lookup("openai", "my-model"); !ok || p.Output != 2000 {
		t.Errorf("my-model = %+v, %v", p, ok)
	}
	os.WriteFile(path, []byte("providers:\n  openai:\n    models:\n      m: {input: 1, output: 2}\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "cached_input") {
		t.Errorf("a model without cached_input: %v", err)
	}
	os.WriteFile(path, []byte("currency: EUR\n"), 0o644)
	if _, err := Load(path); err == nil {
		t.Error("a EUR table: want an error")
	}
}

func TestSum(t *testing.T) {
	var s Sum
	if s.String() != "no calls" {
		t.Errorf("empty = %q", s)
	}
	s.Add(Sum{Unpriced: 2})
	if s.String() != "unpriced" {
		t.Errorf("only unpriced = %q", s)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"usd":"unpriced"`) || strings.Contains(string(b), "nano_usd") {
		t.Errorf("unpriced JSON = %s: want usd unpriced and no nano_usd (never 0)", b)
	}
	s.Add(Sum{Cost: 1500, Priced: 1})
	s.Add(Sum{Priced: 1, CacheHits: 1, Saved: 1500})
	if s.String() != "0.0000015 USD + 2 unpriced calls (cache saved 0.0000015 USD)" {
		t.Errorf("mixed = %q", s)
	}
	b, _ = json.Marshal(s)
	var back Sum
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Errorf("round trip %s = %+v, %v; want %+v", b, back, err, s)
	}
}
