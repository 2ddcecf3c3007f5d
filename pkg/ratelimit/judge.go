package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// StatusRateLimited is the status a limited provider reports to Done for a call that
// failed on a 429.
const StatusRateLimited = judge.StatusRateLimited

// JudgeLimiter is a judge.Limiter.
var _ judge.Limiter = (*JudgeLimiter)(nil)

// DefaultPause is how long every instance pauses a provider key after a call failed on a
// 429. By then the provider has already honoured its own Retry-After through its retries
// and given up, and its last Retry-After does not reach the judge service, so the pause
// is a fixed guess long enough for a per-minute quota window to move on.
const DefaultPause = 10 * time.Second

// JudgeLimiter adapts a Limiter to judge.Limiter, which every provider call waits for: before a call
// it takes one request from the tenant's and the provider's buckets and reserves the
// tokens a call usually costs; after it, it settles the reservation against the tokens
// actually used and, on a 429, pauses the provider key everywhere.
//
// Reserving an estimate is what keeps a token limit meaningful under concurrency: with
// tokens charged only afterwards, every caller finding the bucket out of debt would start
// at once. The estimate is this process's moving average per provider key, so it starts
// at zero and learns.
type JudgeLimiter struct {
	l *Limiter
	// Log reports failures to settle tokens or record a pause (Done cannot return them).
	Log *slog.Logger

	mu       sync.Mutex
	avg      map[string]float64 // tokens per call, moving average
	reserved map[string][]int   // outstanding reservations per provider key
}

// ForJudge returns the adapter wrapped around every provider call (judge.Limited), by
// judges and by renderers running equivalence documents alike.
func (l *Limiter) ForJudge() *JudgeLimiter {
	return &JudgeLimiter{l: l, avg: map[string]float64{}, reserved: map[string][]int{}}
}

// Wait blocks until the tenant and the provider model may make one more call. A token
// limit reserves the call's estimated tokens from the tenant's bucket as from the
// provider's; Done settles both.
func (j *JudgeLimiter) Wait(ctx context.Context, tenant, provider, model string) error {
	limits := j.l.limits
	key, tkey := ProviderKey(provider, model), TenantKey(tenant)
	j.mu.Lock()
	avg := int(j.avg[key])
	j.mu.Unlock()
	tenantEst := 0
	if limits.TenantTokensPerMinute > 0 {
		tenantEst = avg
	}
	tenantLimited := limits.TenantRequestsPerMinute > 0 || limits.TenantTokensPerMinute > 0
	if tenantLimited {
		if err := j.l.Wait(ctx, tkey, 1, tenantEst); err != nil {
			return err
		}
	}
	est := 0
	if limits.TokensPerMinute > 0 {
		est = avg
	}
	if err := j.l.Wait(ctx, key, 1, est); err != nil {
		if tenantEst > 0 {
			// The call will not happen: its tokens go back to the tenant.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if cerr := j.l.Charge(sctx, tkey, -tenantEst); cerr != nil {
				j.log().Warn("rate limit: refunding a tenant's tokens failed", "key", tkey, "tokens", tenantEst, "err", cerr)
			}
		}
		return err
	}
	j.mu.Lock()
	j.reserved[key] = append(j.reserved[key], est)
	if tenantLimited {
		j.reserved[tkey] = append(j.reserved[tkey], tenantEst)
	}
	j.mu.Unlock()
	return nil
}

// takeReservation removes one of key's outstanding reservations and returns it (0 when
// none is left). Any reservation will do: only their sum has to match. j.mu is held.
func (j *JudgeLimiter) takeReservation(key string) int {
	q := j.reserved[key]
	if len(q) == 0 {
		return 0
	}
	res := q[len(q)-1]
	if len(q) == 1 {
		delete(j.reserved, key)
	} else {
		j.reserved[key] = q[:len(q)-1]
	}
	return res
}

// Done settles a call Wait let through. It must be called once for every Wait that
// returned nil, even for a call that failed or was cancelled, so reservations add up.
func (j *JudgeLimiter) Done(ctx context.Context, tenant, provider, model string, promptTokens, completionTokens int, status string) {
	key, tkey := ProviderKey(provider, model), TenantKey(tenant)
	used := promptTokens + completionTokens
	j.mu.Lock()
	res, tres := j.takeReservation(key), j.takeReservation(tkey)
	if used > 0 {
		if a, ok := j.avg[key]; ok {
			j.avg[key] = 0.8*a + 0.2*float64(used)
		} else {
			j.avg[key] = float64(used)
		}
	}
	j.mu.Unlock()
	// Settle even when the call was cancelled: the tokens were spent.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if d := used - res; d != 0 {
		if err := j.l.Charge(sctx, key, d); err != nil {
			j.log().Warn("rate limit: charging tokens failed", "key", key, "tokens", d, "err", err)
		}
	}
	if d := used - tres; d != 0 && j.l.limits.TenantTokensPerMinute > 0 {
		if err := j.l.Charge(sctx, tkey, d); err != nil {
			j.log().Warn("rate limit: charging a tenant's tokens failed", "key", tkey, "tokens", d, "err", err)
		}
	}
	if status == StatusRateLimited {
		pause := j.l.limits.Pause
		if pause <= 0 {
			pause = DefaultPause
		}
		if err := j.l.Backoff(sctx, key, pause); err != nil {
			j.log().Warn("rate limit: recording a 429 pause failed", "key", key, "err", err)
		}
	}
}

func (j *JudgeLimiter) log() *slog.Logger {
	if j.Log != nil {
		return j.Log
	}
	return slog.Default()
}
