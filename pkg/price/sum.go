package price

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Sum is what a set of calls cost: the priced calls' money, how many calls had no price,
// and what cache hits saved (a cache hit costs nothing and is priced at what the call it
// repeats cost). It is how every reader shows a cost: an AC's, a judge's, a batch's, a
// team's.
type Sum struct {
	Cost Money
	// Priced counts the calls Cost covers, cache hits included; Unpriced the calls of a
	// model with no price, which Cost does not cover.
	Priced, Unpriced int
	// Saved is what the cache hits among Priced would have cost as new calls.
	Saved Money
	// CacheHits counts the calls answered from the judge-call cache.
	CacheHits int
	// Recorded counts the calls among Priced that cost nothing because they were
	// answered from recorded answers, no provider asked (the scripted judge,
	// RecordedReason).
	Recorded int
	// PromptTokens, CachedPromptTokens and CompletionTokens are what the calls made (not
	// the cache hits) used, as the provider reported it: what Cost was computed from.
	PromptTokens, CachedPromptTokens, CompletionTokens int64
}

// Add adds o to s.
func (s *Sum) Add(o Sum) {
	s.Cost += o.Cost
	s.Recorded += o.Recorded
	s.Priced += o.Priced
	s.Unpriced += o.Unpriced
	s.Saved += o.Saved
	s.CacheHits += o.CacheHits
	s.PromptTokens += o.PromptTokens
	s.CachedPromptTokens += o.CachedPromptTokens
	s.CompletionTokens += o.CompletionTokens
}

// Zero reports whether s covers no call.
func (s Sum) Zero() bool { return s.Priced == 0 && s.Unpriced == 0 }

// Complete reports whether every call s covers was priced, so Cost is the whole cost.
func (s Sum) Complete() bool { return s.Unpriced == 0 }

// String is the cost as people read it: "0.0042 USD", "unpriced" when no call had a
// price, "0.0042 USD + 3 unpriced calls" when some had none; a saving is added as
// "(cache saved 0.001 USD)".
func (s Sum) String() string {
	var b strings.Builder
	switch {
	case s.Zero():
		b.WriteString("no calls")
	case s.Priced == 0:
		b.WriteString("unpriced")
	default:
		b.WriteString(s.Cost.String())
		if s.Unpriced > 0 {
			fmt.Fprintf(&b, " + %d unpriced call%s", s.Unpriced, plural(s.Unpriced))
		}
	}
	if s.Recorded > 0 {
		fmt.Fprintf(&b, " (%d call%s at 0: %s, no provider asked)", s.Recorded, plural(s.Recorded), RecordedReason)
	}
	if s.Saved > 0 {
		fmt.Fprintf(&b, " (cache saved %s)", s.Saved)
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// sumJSON is Sum's JSON: usd is the decimal dollars as a string (exact), or "unpriced"
// when no call had a price, in which case nano_usd is absent rather than 0.
type sumJSON struct {
	USD                string `json:"usd"`
	NanoUSD            *int64 `json:"nano_usd,omitempty"`
	PricedCalls        int    `json:"priced_calls"`
	UnpricedCalls      int    `json:"unpriced_calls"`
	CacheHits          int    `json:"cache_hits,omitempty"`
	RecordedCalls      int    `json:"recorded_calls,omitempty"`
	RecordedReason     string `json:"recorded_reason,omitempty"`
	SavedUSD           string `json:"saved_usd,omitempty"`
	SavedNanoUSD       int64  `json:"saved_nano_usd,omitempty"`
	PromptTokens       int64  `json:"prompt_tokens"`
	CachedPromptTokens int64  `json:"cached_prompt_tokens,omitempty"`
	CompletionTokens   int64  `json:"completion_tokens"`
}

// MarshalJSON implements json.Marshaler.
func (s Sum) MarshalJSON() ([]byte, error) {
	j := sumJSON{PricedCalls: s.Priced, UnpricedCalls: s.Unpriced, CacheHits: s.CacheHits,
		PromptTokens: s.PromptTokens, CachedPromptTokens: s.CachedPromptTokens, CompletionTokens: s.CompletionTokens}
	if s.Priced == 0 && s.Unpriced > 0 {
		j.USD = "unpriced"
	} else {
		j.USD = s.Cost.Decimal()
		n := int64(s.Cost)
		j.NanoUSD = &n
	}
	if s.Saved > 0 {
		j.SavedUSD, j.SavedNanoUSD = s.Saved.Decimal(), int64(s.Saved)
	}
	if s.Recorded > 0 {
		j.RecordedCalls, j.RecordedReason = s.Recorded, RecordedReason
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Sum) UnmarshalJSON(data []byte) error {
	var j sumJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*s = Sum{Priced: j.PricedCalls, Unpriced: j.UnpricedCalls, CacheHits: j.CacheHits, Recorded: j.RecordedCalls, Saved: Money(j.SavedNanoUSD),
		PromptTokens: j.PromptTokens, CachedPromptTokens: j.CachedPromptTokens, CompletionTokens: j.CompletionTokens}
	if j.NanoUSD != nil {
		s.Cost = Money(*j.NanoUSD)
	}
	return nil
}

// Limit is a budget's size: money, or tokens (prompt plus completion). Exactly one is
// set.
type Limit struct {
	Money  Money `json:"nano_usd,omitempty"`
	Tokens int64 `json:"tokens,omitempty"`
}

// IsZero reports whether the limit sets no budget.
func (l Limit) IsZero() bool { return l.Money == 0 && l.Tokens == 0 }

// String is the limit as ParseLimit reads it: "5.00 USD", "200000 tokens".
func (l Limit) String() string {
	if l.Tokens > 0 {
		return strconv.FormatInt(l.Tokens, 10) + " tokens"
	}
	return l.Money.String()
}

// ParseLimit reads a budget: money ("5.00 USD", "$5") or tokens ("200k tokens",
// "1.5M tokens", "200000 tokens"). A zero or negative budget is refused: it would judge
// nothing, which is never what was meant.
func ParseLimit(s string) (Limit, error) {
	t := strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(strings.ToLower(t), "tokens"); ok {
		n = strings.TrimSpace(n)
		mult := int64(1)
		switch {
		case strings.HasSuffix(n, "k"):
			mult, n = 1_000, strings.TrimSuffix(n, "k")
		case strings.HasSuffix(n, "m"):
			mult, n = 1_000_000, strings.TrimSuffix(n, "m")
		}
		v, err := parseFixed(strings.TrimSpace(n), 3)
		if err != nil {
			return Limit{}, fmt.Errorf("budget %q: %w", s, err)
		}
		tokens := v * mult / 1000
		if tokens <= 0 {
			return Limit{}, fmt.Errorf("budget %q: want more than 0 tokens", s)
		}
		return Limit{Tokens: tokens}, nil
	}
	m, err := ParseMoney(t)
	if err != nil {
		return Limit{}, fmt.Errorf("budget %q: want money (\"5.00 USD\") or tokens (\"200k tokens\"): %w", s, err)
	}
	if m <= 0 {
		return Limit{}, fmt.Errorf("budget %q: want more than 0 USD", s)
	}
	return Limit{Money: m}, nil
}
