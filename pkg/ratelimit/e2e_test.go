package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
)

// throttled is a scripted judge that reports token usage and answers its first call
// the way the openai provider gives up on a 429.
type throttled struct {
	*scripted.Provider
	calls atomic.Int64
}

func (p *throttled) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	if p.calls.Add(1) == 1 {
		return judge.Response{}, fmt.Errorf("%w: openai[test]: model %s: gave up after 3 attempt(s): %w: Rate limit reached", judge.ErrUnavailable, req.Model, &judge.StatusError{Status: 429})
	}
	resp, err := p.Provider.Complete(ctx, req)
	resp.PromptTokens, resp.CompletionTokens = 50, 5
	return resp, err
}

// TestBatchUnderSharedLimits runs a batch through two judge instances that share limits
// through app.Start: it completes, no faster than the rate and the 429 pause allow.
func TestBatchUnderSharedLimits(t *testing.T) {
	env := e2e.NewEnv(t)
	s, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	p := &throttled{Provider: s}
	limits := &ratelimit.Limits{RequestsPerMinute: 1200, TokensPerMinute: 600_000, TenantRequestsPerMinute: 1200, Pause: 500 * time.Millisecond}
	start := func(instance string, services ...string) *app.Running {
		r, err := app.Start(context.Background(), env.Conn(), app.Options{
			Services: services, Bus: env.Bus, Concurrency: 8, Store: env.Store, Provider: p,
			Instance: instance, RateLimits: limits, CloseTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	r := start("p1", bus.Renderer, bus.Gater, bus.Aggregator, bus.Judge)
	start("p2", bus.Judge)

	const n = 8
	began := time.Now()
	sub := env.Submit(e2e.WriteBatch(t, e2e.TextBatch(n, "")), "team-a")
	res := env.Wait(sub, 10*time.Second)
	took := time.Since(began)
	if res.Summary.Total != n {
		t.Fatalf("summary %+v, want %d ACs", res.Summary, n)
	}
	calls := p.calls.Load()
	t.Logf("batch of %d: %d provider calls in %s; summary %+v", n, calls, took.Round(time.Millisecond), res.Summary)
	if calls < n {
		t.Fatalf("%d provider calls for %d ACs", calls, n)
	}
	// The first call's 429 paused every instance for 500ms.
	if took < 500*time.Millisecond {
		t.Fatalf("batch took %s despite a 500ms pause after the 429", took)
	}

	kv, err := r.JS.KeyValue(context.Background(), ratelimit.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), ratelimit.ProviderKey(p.Name(), p.DefaultModel()))
	if err != nil {
		t.Fatalf("provider key: %v", err)
	}
	var st struct {
		Tokens      float64   `json:"tokens"`
		PausedUntil time.Time `json:"paused_until"`
	}
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	if st.PausedUntil.IsZero() {
		t.Fatalf("no pause recorded after the 429: %s", e.Value())
	}
	if _, err := kv.Get(context.Background(), ratelimit.TenantKey("team-a")); err != nil {
		t.Fatalf("tenant key: %v", err)
	}
}

// stamped records when each call of a kind reached the provider.
type stamped struct {
	*scripted.Provider
	mu    sync.Mutex
	times map[string][]time.Time
}

func (p *stamped) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	p.mu.Lock()
	p.times[req.Kind] = append(p.times[req.Kind], time.Now())
	p.mu.Unlock()
	return p.Provider.Complete(ctx, req)
}

// TestRunnerCallsShareTheLimits: the equivalence runner's calls (made by the renderer,
// not the judge) draw from the same tenant and provider buckets as verdicts, so a team
// cannot exceed its share through documents run on its behalf.
func TestRunnerCallsShareTheLimits(t *testing.T) {
	env := e2e.NewEnv(t)
	s, err := scripted.New(scripted.Options{Fixtures: map[string]string{"runner": "on", "equivalence": "equivalent"}})
	if err != nil {
		t.Fatal(err)
	}
	p := &stamped{Provider: s, times: map[string][]time.Time{}}
	// 600 a minute with no burst: one call every 100 ms for the tenant, whoever makes it.
	const spacing = 100 * time.Millisecond
	limits := &ratelimit.Limits{RequestsPerMinute: 60_000, TenantRequestsPerMinute: 600}
	r, err := app.Start(context.Background(), env.Conn(), app.Options{
		Bus: env.Bus, Concurrency: 8, Store: env.Store, Provider: p,
		Instance: "p1", RateLimits: limits, CloseTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)

	cases := "    cases:\n"
	for i := range 4 {
		cases += fmt.Sprintf("      - {id: c%d, tag: happy, input: \"case %d\"}\n", i, i)
	}
	files := map[string]string{
		"original.md":  "# Skill\nAlways ask first.\n",
		"candidate.md": "# Skill\nAsk.\n",
		"batch.yaml":   "version: 1\nname: eq\nacs:\n  - id: AC-eq\n    kind: equivalence\n    original: original.md\n    candidate: candidate.md\n" + cases,
	}
	res := env.Wait(env.Submit(e2e.WriteBatch(t, files), "team-a"), 30*time.Second)
	if res.Summary.Total != 1 {
		t.Fatalf("summary %+v", res.Summary)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	runner := p.times[equivalence.KindRunner]
	if len(runner) != 8 {
		t.Fatalf("%d runner calls; want 8 (teacher and candidate for 4 cases)", len(runner))
	}
	var all []time.Time
	for _, ts := range p.times {
		all = append(all, ts...)
	}
	slices.SortFunc(all, time.Time.Compare)
	// Evenly spaced calls: n calls span at least n-1 gaps. Without the runner behind the
	// limiter its 8 calls would go out at once.
	span := all[len(all)-1].Sub(all[0])
	if min := time.Duration(len(all)-1) * spacing * 8 / 10; span < min {
		t.Fatalf("%d calls (%d by the runner) within %s; the tenant limit allows no more than one per %s", len(all), len(runner), span, spacing)
	}
}
