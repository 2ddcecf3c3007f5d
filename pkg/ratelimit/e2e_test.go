package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
)

// throttled is a scripted judge that reports token usage and answers its first call
// the way the openai provider gives up on a 429.
type throttled struct {
	*judge.Scripted
	calls atomic.Int64
}

func (p *throttled) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	if p.calls.Add(1) == 1 {
		return judge.Response{}, fmt.Errorf("%w: openai[test]: model %s: gave up after 3 attempt(s): HTTP 429: Rate limit reached", judge.ErrUnavailable, req.Model)
	}
	resp, err := p.Scripted.Complete(ctx, req)
	resp.PromptTokens, resp.CompletionTokens = 50, 5
	return resp, err
}

// TestBatchUnderSharedLimits runs a batch through two judge instances that share limits
// through app.Start: it completes, no faster than the rate and the 429 pause allow.
func TestBatchUnderSharedLimits(t *testing.T) {
	env := e2e.NewEnv(t)
	s, err := judge.NewScripted(judge.ScriptedOptions{Winner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	p := &throttled{Scripted: s}
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
