package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// ReasonBudget is the refusal reason of tribunal_refusals_total for a call a budget
// refused.
const ReasonBudget = "budget_exhausted"

// Estimate bounds. A call's estimate must never be less than what it can cost, or
// concurrent judges could overspend together.
const (
	// PerMessageTokens bounds the tokens a chat format adds around each message.
	PerMessageTokens = 8
	// PerImageTokens bounds one image's prompt tokens: OpenAI's largest high-detail
	// image (a 2048 × 768 tiling at the patch models' multiplier) stays under it.
	PerImageTokens = 2500
	// DefaultAnswerTokens bounds an answer when neither the request nor the provider
	// names a limit: the openai provider's largest default (reasoning models).
	DefaultAnswerTokens = 16384
)

// Period is how long a team's budget lasts before it starts again: "day", "week" (ISO
// weeks, from Monday) or "month", in UTC.
type Period string

// Periods of a team budget.
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
)

// Start names the period holding t: "2026-12-02", "2026-W49", "2026-12".
func (p Period) Start(t time.Time) string {
	t = t.UTC()
	switch p {
	case Day:
		return t.Format("2006-01-02")
	case Week:
		y, w := t.ISOWeek()
		return fmt.Sprintf("%d-W%02d", y, w)
	default:
		return t.Format("2006-01")
	}
}

// TenantBudget is a team's budget per period.
type TenantBudget struct {
	Limit  price.Limit
	Period Period
}

// String is the budget as --tenant-budget takes it: "5.00 USD/day".
func (b TenantBudget) String() string { return b.Limit.String() + "/" + string(b.Period) }

// AnyTenant, as a team in --tenant-budget, gives every team without a budget of its own
// that budget (each team its own, not one shared by all).
const AnyTenant = "*"

// ParseTenantBudgets reads --tenant-budget entries, "team=<limit>/<period>" ("team-a=50
// USD/month", "*=200k tokens/day"). A team named twice is refused.
func ParseTenantBudgets(entries []string) (map[string]TenantBudget, error) {
	out := map[string]TenantBudget{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		team, spec, ok := strings.Cut(e, "=")
		team = strings.TrimSpace(team)
		if !ok {
			return nil, fmt.Errorf("--tenant-budget %q: want team=<limit>/<period>, e.g. team-a=50 USD/month", e)
		}
		if team != AnyTenant {
			if err := events.ValidateTenant(team); err != nil {
				return nil, fmt.Errorf("--tenant-budget %q: %w", e, err)
			}
		}
		if _, dup := out[team]; dup {
			return nil, fmt.Errorf("--tenant-budget: team %s is given two budgets; give one", team)
		}
		limit, period, ok := strings.Cut(spec, "/")
		if !ok {
			return nil, fmt.Errorf("--tenant-budget %q: want a period after the limit: /day, /week or /month", e)
		}
		p := Period(strings.TrimSpace(period))
		if p != Day && p != Week && p != Month {
			return nil, fmt.Errorf("--tenant-budget %q: period %q: want day, week or month", e, period)
		}
		l, err := price.ParseLimit(limit)
		if err != nil {
			return nil, fmt.Errorf("--tenant-budget %q: %w", e, err)
		}
		out[team] = TenantBudget{Limit: l, Period: p}
	}
	return out, nil
}

// batchKey carries a job's batch budget to the wrapper.
type batchKey struct{}

type batchBudget struct {
	tenant, batch string
	limit         price.Limit
}

// WithBatch marks ctx as judging a job of tenant's batch whose budget is limit (the
// batch file's `budget:`, "" for none): the calls made under it are charged to it.
func WithBatch(ctx context.Context, tenant, batch, limit string) (context.Context, error) {
	if limit == "" {
		return ctx, nil
	}
	l, err := price.ParseLimit(limit)
	if err != nil {
		return ctx, fmt.Errorf("batch %s: %w", batch, err)
	}
	return context.WithValue(ctx, batchKey{}, batchBudget{tenant: tenant, batch: batch, limit: l}), nil
}

// Config is what the wrapper charges calls to beyond their batch's budget.
type Config struct {
	// Tenants are the teams' budgets per period, AnyTenant for every other team.
	Tenants map[string]TenantBudget
	// Now is the clock periods are read on; nil is time.Now.
	Now func() time.Time
	// HoldFor is how long a call's reservation lasts if it is never settled (its judge
	// died): longer than the call can take, 0 for DefaultHoldFor. A batch-mode call,
	// parked for up to a day, needs batchmode.Config.HoldFor.
	HoldFor time.Duration
	Log     *slog.Logger
}

// Provider wraps p so that every call is reserved from its budgets first and settled
// after (Ledger). A call no budget covers goes through untouched. p should be the priced
// provider (judge.Priced), or wrap it: the estimate and the settlement use its prices.
func Provider(p judge.Provider, l *Ledger, c Config) judge.Provider {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return &provider{Provider: p, l: l, c: c}
}

type provider struct {
	judge.Provider
	l *Ledger
	c Config
}

// Unwrap is the provider the budgets wrap.
func (p *provider) Unwrap() judge.Provider { return p.Provider }

// scopes are the budgets a call under ctx is charged to.
func (p *provider) scopes(ctx context.Context) []Scope {
	var out []Scope
	if b, ok := ctx.Value(batchKey{}).(batchBudget); ok {
		out = append(out, Scope{Key: BatchKey(b.tenant, b.batch), Limit: b.limit, What: "the batch's budget"})
	}
	if tenant := judge.TenantOf(ctx); tenant != "" {
		tb, ok := p.c.Tenants[tenant]
		if !ok {
			tb, ok = p.c.Tenants[AnyTenant]
		}
		if ok {
			period := tb.Period.Start(p.c.Now())
			out = append(out, Scope{Key: TenantKey(tenant, period), Limit: tb.Limit,
				What: fmt.Sprintf("team %s's budget for %s", tenant, period)})
		}
	}
	return out
}

// Estimate is the most req can cost at pr (priced false: unknown money): every prompt
// byte a token (no tokenizer makes a token of less than a byte), each message's framing,
// each image at PerImageTokens, the answer schema, and the whole answer limit.
func Estimate(req judge.Request, answerLimit int, pr price.Price, priced bool) Amount {
	prompt := 16
	for _, m := range req.Messages {
		prompt += PerMessageTokens
		for _, part := range m.Parts {
			if part.Image != nil {
				prompt += PerImageTokens
				continue
			}
			prompt += len(part.Text)
		}
	}
	if req.Schema != nil {
		prompt += len(req.Schema.JSON) + len(req.Schema.Name)
	}
	a := Amount{Tokens: int64(prompt + answerLimit)}
	if priced {
		a.Money = pr.Estimate(prompt, answerLimit)
	}
	return a
}

// answerLimit is the most tokens req's answer may take.
func (p *provider) answerLimit(req judge.Request, model string) int {
	if req.Params.MaxTokens > 0 {
		return req.Params.MaxTokens
	}
	if m, ok := judge.Find[interface{ MaxAnswerTokens(string) int }](p.Provider); ok {
		if n := m.MaxAnswerTokens(model); n > 0 {
			return n
		}
	}
	return DefaultAnswerTokens
}

func (p *provider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	scopes := p.scopes(ctx)
	if len(scopes) == 0 {
		return p.Provider.Complete(ctx, req)
	}
	model := req.Model
	if model == "" {
		model = p.DefaultModel()
	}
	var pr price.Price
	priced := false
	if pc, ok := judge.Find[judge.Pricer](p.Provider); ok {
		pr, priced = pc.PriceOf(model)
	}
	est := Estimate(req, p.answerLimit(req, model), pr, priced)
	if !priced {
		for _, sc := range scopes {
			if sc.Limit.Money > 0 {
				telemetry.Refused("judge", ReasonBudget)
				return judge.Response{}, &Refusal{Scope: sc, Unpriced: model}
			}
		}
	}
	hold, err := p.l.Reserve(ctx, scopes, est, p.c.HoldFor)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			telemetry.Refused("judge", ReasonBudget)
			p.c.Log.DebugContext(ctx, "budget: call refused", "tenant", judge.TenantOf(ctx), "model", model, "reason", r.Error())
			return judge.Response{}, err
		}
		// The budget could not be read: the call is not made unchecked.
		return judge.Response{}, fmt.Errorf("%w: %w", judge.ErrUnavailable, err)
	}
	resp, err := p.Provider.Complete(ctx, req)
	used := Amount{Money: resp.Cost, Tokens: int64(resp.PromptTokens + resp.CompletionTokens)}
	if serr := p.l.Settle(ctx, hold, used); serr != nil {
		p.c.Log.WarnContext(ctx, "budget: settling a call failed; its estimate stays reserved", "err", serr)
	}
	return resp, err
}

// Describe lists the team budgets as one line for logs: "*=5.00 USD/day, team-a=...".
func Describe(tenants map[string]TenantBudget) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(tenants)) {
		parts = append(parts, t+"="+tenants[t].String())
	}
	return strings.Join(parts, ", ")
}
