// Package price turns a judge call's token usage into money: the price table (per
// provider and model, the input, cached input and output prices and the provider's batch
// discount), the arithmetic, and the limits a budget is given in ("5.00 USD", "200k
// tokens").
//
// Money is an integer count of nano-dollars (10^-9 USD), never a float. A list price is
// quoted per million tokens with at most three decimals, so it is a whole number of
// nano-dollars per token, a call's cost (tokens × price) is exact, and a batch's or a
// team's total is an exact sum whatever the order it is added in. A float would make two
// readers of the same calls disagree in the last digit, and a budget compare the wrong
// way at its edge; a decimal library would buy nothing integers do not already give.
// int64 nano-dollars hold 9.2 billion dollars.
//
// A model the table does not price is unpriced: its calls are counted apart and shown
// as unpriced, never as costing 0.
package price

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Money is an amount in nano-dollars (10^-9 USD).
type Money int64

// NanosPerUSD is how many Money units make a dollar.
const NanosPerUSD = 1_000_000_000

// String is the amount in dollars with as many decimals as it needs, at least two:
// "5.00 USD", "0.00421575 USD".
func (m Money) String() string { return m.Decimal() + " USD" }

// Decimal is the amount in dollars as a decimal number, without the currency: "0.00421575".
func (m Money) Decimal() string {
	neg := m < 0
	v := uint64(m)
	if neg {
		v = uint64(-m)
	}
	s := fmt.Sprintf("%d.%09d", v/NanosPerUSD, v%NanosPerUSD)
	s = strings.TrimRight(s, "0")
	if i := strings.IndexByte(s, '.'); len(s)-i-1 < 2 {
		s += strings.Repeat("0", 2-(len(s)-i-1))
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ParseMoney reads an amount of dollars: "5.00 USD", "5 USD", "$5", "0.25". More than nine
// decimals, a negative amount or another currency is refused.
func ParseMoney(s string) (Money, error) {
	t := strings.TrimSpace(s)
	if cur, ok := strings.CutSuffix(strings.ToUpper(t), "USD"); ok {
		t = strings.TrimSpace(t[:len(cur)])
	} else if rest, ok := strings.CutPrefix(t, "$"); ok {
		t = strings.TrimSpace(rest)
	} else if i := strings.LastIndexByte(t, ' '); i >= 0 {
		return 0, fmt.Errorf("amount %q: currency %q: only USD is priced", s, t[i+1:])
	}
	n, err := parseFixed(t, 9)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	return Money(n), nil
}

// parseFixed reads a non-negative decimal with at most places decimals as an integer
// scaled by 10^places.
func parseFixed(s string, places int) (int64, error) {
	if s == "" {
		return 0, errors.New("want a number")
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" {
		whole = "0"
	}
	if len(frac) > places {
		return 0, fmt.Errorf("want at most %d decimals", places)
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("want a non-negative decimal number, got %q", s)
			}
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number %q: %w", s, err)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", places-len(frac)), 10, 64)
	} else if places > 0 {
		f = 0
	}
	scale := int64(math.Pow10(places))
	if w > math.MaxInt64/scale-1 {
		return 0, fmt.Errorf("number %q is too large", s)
	}
	return w*scale + f, nil
}

// Rate is a price per token in nano-dollars: a list price of USD 2.50 per million tokens
// is 2500.
type Rate int64

// ParseRate reads a list price in USD per million tokens ("2.50", "0.075"), at most
// three decimals (a whole number of nano-dollars per token).
func ParseRate(perMillion string) (Rate, error) {
	n, err := parseFixed(strings.TrimSpace(perMillion), 3)
	if err != nil {
		return 0, fmt.Errorf("price %q per million tokens: %w", perMillion, err)
	}
	return Rate(n), nil
}

// PerMillion is the rate as a list price, USD per million tokens: "2.50".
func (r Rate) PerMillion() string { return (Money(r) * 1_000_000).Decimal() }

// Price is what one provider's model costs.
type Price struct {
	// Input, CachedInput and Output are the per-token prices of prompt tokens, of prompt
	// tokens the provider served from its prompt cache, and of completion tokens.
	Input       Rate `json:"input"`
	CachedInput Rate `json:"cached_input"`
	Output      Rate `json:"output"`
	// BatchDiscountPercent is the provider's discount on calls made through its batch API
	// (OpenAI's: 50).
	BatchDiscountPercent int `json:"batch_discount_percent,omitempty"`
}

// Usage is what one call used, as its provider reported it.
type Usage struct {
	PromptTokens int
	// CachedPromptTokens are the prompt tokens the provider served from its own prompt
	// cache, part of PromptTokens (billed at CachedInput).
	CachedPromptTokens int
	CompletionTokens   int
	// Batch marks a call made through the provider's batch API.
	Batch bool
}

// Cost is what u costs at p: uncached prompt tokens at Input, cached ones at CachedInput,
// completion tokens at Output, less the batch discount for a batch call (rounded to the
// nearest nano-dollar, half up).
func (p Price) Cost(u Usage) Money {
	cached := min(max(u.CachedPromptTokens, 0), max(u.PromptTokens, 0))
	uncached := max(u.PromptTokens, 0) - cached
	c := int64(uncached)*int64(p.Input) + int64(cached)*int64(p.CachedInput) + int64(max(u.CompletionTokens, 0))*int64(p.Output)
	if u.Batch && p.BatchDiscountPercent > 0 {
		c = (c*int64(100-p.BatchDiscountPercent) + 50) / 100
	}
	return Money(c)
}

// Estimate is the most a call can cost that sends at most prompt prompt tokens and gets
// at most completion tokens back: every prompt token uncached, no batch discount.
func (p Price) Estimate(prompt, completion int) Money {
	return p.Cost(Usage{PromptTokens: prompt, CompletionTokens: completion})
}

// String is the price as the command line takes it: "2.50/1.25/10.00 per 1M tokens".
func (p Price) String() string {
	s := p.Input.PerMillion() + "/" + p.CachedInput.PerMillion() + "/" + p.Output.PerMillion() + " USD per 1M tokens"
	if p.BatchDiscountPercent > 0 {
		s += fmt.Sprintf(", batch -%d%%", p.BatchDiscountPercent)
	}
	return s
}
