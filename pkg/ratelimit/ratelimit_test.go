package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
)

// pair starts a server and two limiters on separate connections, as two processes.
func pair(t *testing.T, limits Limits) (*Limiter, *Limiter) {
	t.Helper()
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ls [2]*Limiter
	for i := range ls {
		_, js := s.Connect(t)
		l, err := New(ctx, js, limits)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	return ls[0], ls[1]
}

// peek reads key's stored state and its server timestamp.
func peek(t *testing.T, l *Limiter, key string) (state, jetstream.KeyValueEntry) {
	t.Helper()
	e, err := l.kv.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	return st, e
}

func TestSharedRateAcrossInstances(t *testing.T) {
	const rpm = 600 // 10/s
	a, b := pair(t, Limits{RequestsPerMinute: rpm})
	key := ProviderKey("openai", "gpt-4o-mini")
	// Cancel rather than a deadline: Wait would give up early on a deadline it cannot meet.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	time.AfterFunc(3*time.Second, cancel)
	var granted [2]atomic.Int64
	var wg sync.WaitGroup
	for i, l := range []*Limiter{a, b} {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if err := l.Wait(ctx, key, 1, 0); err != nil {
						if ctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					granted[i].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := granted[0].Load() + granted[1].Load()
	limit := float64(rpm)/60*elapsed.Seconds() + 1 // burst 1
	t.Logf("granted %d+%d=%d in %s (limit %.1f)", granted[0].Load(), granted[1].Load(), total, elapsed.Round(time.Millisecond), limit)
	if float64(total) > limit {
		t.Fatalf("granted %d permits in %s, more than rate*elapsed+burst = %.1f", total, elapsed, limit)
	}
	if float64(total) < 0.6*float64(rpm)/60*elapsed.Seconds() {
		t.Fatalf("granted only %d permits in %s: far below the rate", total, elapsed)
	}
	if granted[0].Load() == 0 || granted[1].Load() == 0 {
		t.Fatalf("one instance got nothing: %d / %d", granted[0].Load(), granted[1].Load())
	}
}

func TestTenantKeysAreIndependent(t *testing.T) {
	a, b := pair(t, Limits{TenantRequestsPerMinute: 60})
	ctx := context.Background()
	if err := a.Wait(ctx, TenantKey("team-a"), 1, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Wait(ctx, TenantKey("team-b"), 1, 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("team-b waited %s behind team-a", d)
	}
	// team-a's next permit is a second away on either instance.
	for _, l := range []*Limiter{a, b} {
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := l.Wait(dctx, TenantKey("team-a"), 1, 0)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second team-a permit within 300ms: err = %v", err)
		}
	}
}

func TestBackoffPausesEveryInstance(t *testing.T) {
	a, b := pair(t, Limits{RequestsPerMinute: 6000, Burst: 10})
	key := ProviderKey("openai", "m")
	ctx := context.Background()
	if err := b.Wait(ctx, key, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Backoff(ctx, key, time.Second); err != nil {
		t.Fatal(err)
	}
	// A shorter pause recorded later does not cut the first one short.
	if err := b.Backoff(ctx, key, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := b.Wait(dctx, key, 1, 0)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait during the pause: err = %v", err)
	}
	start := time.Now()
	if err := b.Wait(ctx, key, 1, 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 700*time.Millisecond || d > 3*time.Second {
		t.Fatalf("paused wait took %s, want about the rest of 1s", d)
	}
	st, _ := peek(t, a, key)
	// Halved once (the second Backoff fell inside the pause), recovering since the pause.
	if st.Slow < 0.5 || st.Slow > 0.55 {
		t.Fatalf("slowdown after one 429 episode = %v, want just over 0.5", st.Slow)
	}
	// Another key is not paused.
	start = time.Now()
	if err := a.Wait(ctx, ProviderKey("openai", "other"), 1, 0); err != nil || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("other key: err %v after %s", err, time.Since(start))
	}
}

func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	// Refill of 1 per minute is negligible over the test, so the levels count operations.
	const burst = 1_000_000
	a, b := pair(t, Limits{RequestsPerMinute: 1, Burst: burst, TokensPerMinute: 1, TokenBurst: burst})
	key := ProviderKey("openai", "cas")
	const perG = 20
	var wg sync.WaitGroup
	for _, l := range []*Limiter{a, b} {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perG {
					if err := l.Wait(context.Background(), key, 1, 2); err != nil {
						t.Error(err)
						return
					}
					if err := l.Charge(context.Background(), key, 3); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	n := 2 * 8 * perG
	st, _ := peek(t, a, key)
	if want := float64(burst - n); st.Requests < want || st.Requests > want+1 {
		t.Fatalf("requests level %v after %d permits, want %v (+refill < 1)", st.Requests, n, want)
	}
	if want := float64(burst - 5*n); st.Tokens < want || st.Tokens > want+1 {
		t.Fatalf("tokens level %v after %d x (2 reserved + 3 charged), want %v (+refill < 1)", st.Tokens, n, want)
	}
}

func TestTokenDebtDelaysLaterCallers(t *testing.T) {
	a, b := pair(t, Limits{TokensPerMinute: 6000, TokenBurst: 100}) // 100 tokens/s
	key := ProviderKey("openai", "tok")
	ctx := context.Background()
	if err := a.Wait(ctx, key, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Charge(ctx, key, 150); err != nil { // 100 - 150 = -50: half a second of debt
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Wait(ctx, key, 1, 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 350*time.Millisecond || d > 3*time.Second {
		t.Fatalf("wait behind a 50-token debt at 100/s took %s", d)
	}
	// A refund never lifts the bucket above its burst.
	if err := b.Charge(ctx, key, -1000); err != nil {
		t.Fatal(err)
	}
	if st, _ := peek(t, a, key); st.Tokens > 100 {
		t.Fatalf("tokens %v above the burst after a refund", st.Tokens)
	}
}

func TestJudgeLimiterSettlesAndPauses(t *testing.T) {
	a, b := pair(t, Limits{RequestsPerMinute: 6000, Burst: 10, TokensPerMinute: 1, TokenBurst: 10_000, TenantRequestsPerMinute: 6000, Pause: 600 * time.Millisecond})
	ja, jb := a.ForJudge(), b.ForJudge()
	ctx := context.Background()
	key := ProviderKey("openai", "gpt-x")
	// First call reserves nothing (no estimate yet), then learns 100 tokens per call.
	if err := ja.Wait(ctx, "t1", "openai", "gpt-x"); err != nil {
		t.Fatal(err)
	}
	ja.Done(ctx, "t1", "openai", "gpt-x", 90, 10, "ok")
	// Second call reserves 100, uses 40: 60 refunded.
	if err := ja.Wait(ctx, "t1", "openai", "gpt-x"); err != nil {
		t.Fatal(err)
	}
	ja.Done(ctx, "t1", "openai", "gpt-x", 30, 10, "ok")
	if st, _ := peek(t, a, key); st.Tokens < 10_000-140 || st.Tokens > 10_000-139 {
		t.Fatalf("tokens %v, want 10000-140 charged in total", st.Tokens)
	}
	if _, e := peek(t, a, TenantKey("t1")); e == nil {
		t.Fatal("tenant key not written")
	}
	// A 429 on one instance pauses the other.
	if err := ja.Wait(ctx, "t1", "openai", "gpt-x"); err != nil {
		t.Fatal(err)
	}
	ja.Done(ctx, "t1", "openai", "gpt-x", 0, 0, StatusRateLimited)
	start := time.Now()
	if err := jb.Wait(ctx, "t2", "openai", "gpt-x"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("instance b waited %s after a's 429, want the 600ms pause", d)
	}
	jb.Done(ctx, "t2", "openai", "gpt-x", 1, 1, "ok")
}

func TestKeysEscapeNames(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"openai", "gpt-4.1"}:            "provider.openai.gpt-4=2E1",
		{"openai", "llama3:8b"}:          "provider.openai.llama3=3A8b",
		{"openai", ""}:                   "provider.openai.=",
		{"openai", "meta/Llama 3=x"}:     "provider.openai.meta=2FLlama=203=3Dx",
		{"scripted", "fixture-winner_A"}: "provider.scripted.fixture-winner_A",
	} {
		if got := ProviderKey(in[0], in[1]); got != want {
			t.Errorf("ProviderKey(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
	a, _ := pair(t, Limits{RequestsPerMinute: 60})
	if err := a.Wait(context.Background(), ProviderKey("openai", "meta/Llama 3:8b"), 1, 0); err != nil {
		t.Fatalf("escaped key rejected: %v", err)
	}
	if err := a.Wait(context.Background(), "other.x", 1, 0); err == nil {
		t.Fatal("unknown key prefix accepted")
	}
}

func TestServerClockOnlyMovesForward(t *testing.T) {
	var c serverClock
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c.observe(base)
	// An old entry (written long ago) says nothing new.
	c.observe(base.Add(-time.Hour))
	if n := c.now(); n.Before(base) || n.After(base.Add(time.Second)) {
		t.Fatalf("now %s after an older observation, want about %s", n, base)
	}
	// A newer one pulls the estimate forward: the server is ahead of what we thought.
	c.observe(base.Add(time.Minute))
	if n := c.now(); n.Before(base.Add(time.Minute)) {
		t.Fatalf("now %s, want at least %s", n, base.Add(time.Minute))
	}
}

func TestRefillIsCappedAndStopsWhilePaused(t *testing.T) {
	r := rule{rpm: 60, burst: 2, tpm: 600, tokenBurst: 100}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := state{Requests: -1, Tokens: 0, PausedUntil: at.Add(10 * time.Second)}
	st.refill(r, at, at.Add(11*time.Second))
	if st.Requests != 0 || st.Tokens != 10 {
		t.Fatalf("after 1s past a pause: %+v, want requests 0 tokens 10", st)
	}
	st.refill(r, at, at.Add(time.Hour))
	if st.Requests != 2 || st.Tokens != 100 {
		t.Fatalf("after an hour: %+v, want the bursts", st)
	}
}

// TestTenantTokensPerMinute: a tenant that spent its minute's tokens, on one instance and
// one model, is held back on every instance and for every model until the debt is
// repaid, while another tenant is not.
func TestTenantTokensPerMinute(t *testing.T) {
	a, b := pair(t, Limits{TenantTokensPerMinute: 600})
	ja, jb := a.ForJudge(), b.ForJudge()
	ctx := context.Background()
	if err := ja.Wait(ctx, "team-a", "openai", "o1-pro"); err != nil {
		t.Fatal(err)
	}
	ja.Done(ctx, "team-a", "openai", "o1-pro", 1000, 200, "ok")
	st, _ := peek(t, a, TenantKey("team-a"))
	if st.Tokens > -590 {
		t.Fatalf("team-a's bucket holds %v tokens after spending 1200 of 600 a minute", st.Tokens)
	}
	// A debt of 600 tokens takes a minute to repay: far past a short deadline, so Wait
	// gives up at once.
	for i, j := range []*JudgeLimiter{ja, jb} {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := j.Wait(dctx, "team-a", "openai", "gpt-4o-mini")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("instance %d let team-a call again: err = %v", i, err)
		}
	}
	if err := jb.Wait(ctx, "team-b", "openai", "o1-pro"); err != nil {
		t.Fatalf("team-b held back by team-a's spending: %v", err)
	}
	jb.Done(ctx, "team-b", "openai", "o1-pro", 10, 10, "ok")
}
