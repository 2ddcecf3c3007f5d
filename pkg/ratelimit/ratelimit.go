// Package ratelimit holds rate limits that every judge instance shares: token buckets
// kept in a JetStream key-value bucket, so N processes calling one provider together
// stay under its requests- and tokens-per-minute quota instead of each spending the
// whole quota and living on 429s.
//
// Each key ("provider.<name>.<model>", "tenant.<tenant>") is one small JSON value holding
// the bucket levels, a "paused until" time and a slowdown factor. Every change is a
// compare-and-set on the entry's revision (Create when the key is missing), retried on
// conflict, so concurrent goroutines and processes never lose an update.
//
// Time: levels refill by elapsed time, and elapsed time is measured on the NATS server's
// clock, never on the callers' wall clocks, which may disagree. The stored levels are
// taken to be as of the entry's server timestamp (entry.Created()), and each Limiter
// tracks the server's "now" as a lower bound: the newest entry timestamp it has seen plus
// the monotonic time since it saw it. The estimate can only lag the server, which means
// less refill than due (a little slower, never faster than the limit); it is immune to
// wall-clock steps on the caller. The assumption left is that the servers of a JetStream
// cluster keep roughly synchronised clocks, as JetStream's own MaxAge already assumes.
package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"
	"github.com/tribunal-dev/tribunal/pkg/kv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// DefaultBucket is the key-value bucket the limiter creates when Limits names none.
// pkg/bus does not provision it: only processes with limits configured need it.
const DefaultBucket = "tribunal_ratelimit"

const (
	// maxSleep bounds one sleep between looks at the shared state, so a refund or a
	// changed pause written by another instance is noticed soon.
	maxSleep = time.Second
	// recoverPeriod is how long a slowed key takes to climb linearly back from its
	// slowdown factor to the full rate.
	recoverPeriod = time.Minute
	// minSlow is the lowest slowdown factor repeated 429s drive a key to.
	minSlow = 1.0 / 8
	// idleTTL is how long an untouched key is kept; an expired key reads as full, which
	// is what a minute of idleness refills it to anyway.
	idleTTL = time.Hour
)

// Limits are the shared rates. Zero disables a limit.
type Limits struct {
	// RequestsPerMinute limits each provider key ("provider.<name>.<model>") across all
	// instances: the provider's RPM quota, minus headroom for anyone else using it.
	RequestsPerMinute int
	// TokensPerMinute limits prompt plus completion tokens per provider key. Tokens are
	// known only after a call, so they are debited afterwards with Charge; a bucket in
	// debt holds later callers back until refill pays it off.
	TokensPerMinute int
	// TenantRequestsPerMinute limits each tenant ("tenant.<tenant>") across every
	// provider, so one tenant's big batch cannot take the whole quota.
	TenantRequestsPerMinute int
	// TenantTokensPerMinute limits each tenant's prompt plus completion tokens across
	// every provider and model: what a team spends, which its request rate alone does not
	// bound (one long prompt to a dear model costs a hundred short ones). Debited after
	// each call like TokensPerMinute; its burst is one minute's worth.
	TenantTokensPerMinute int
	// Burst is how many requests a key may save up while idle and then send at once.
	// 0 means 1: requests go out evenly spaced, which is what keeps a herd of instances
	// from tripping a provider that enforces its per-minute quota over shorter windows.
	Burst int
	// TokenBurst is how many tokens a provider key may save up while idle. 0 means one
	// minute's worth (TokensPerMinute), which is what a per-minute quota allows.
	TokenBurst int
	// Pause is how long every instance pauses a provider key after the judge service
	// reports a call that failed on a 429; 0 means DefaultPause.
	Pause time.Duration
	// Bucket names the key-value bucket; empty means DefaultBucket.
	Bucket string
	// Replicas is the bucket's replication factor; 0 means 1.
	Replicas int
}

// rule is the bucket shape of one key.
type rule struct {
	rpm, burst      float64
	tpm, tokenBurst float64
}

func (l Limits) rule(key string) (rule, error) {
	burst := float64(max(l.Burst, 1))
	switch {
	case strings.HasPrefix(key, "provider."):
		r := rule{rpm: float64(l.RequestsPerMinute), burst: burst, tpm: float64(l.TokensPerMinute), tokenBurst: float64(l.TokenBurst)}
		if r.tokenBurst <= 0 {
			r.tokenBurst = r.tpm
		}
		return r, nil
	case strings.HasPrefix(key, "tenant."):
		tpm := float64(l.TenantTokensPerMinute)
		return rule{rpm: float64(l.TenantRequestsPerMinute), burst: burst, tpm: tpm, tokenBurst: tpm}, nil
	default:
		return rule{}, fmt.Errorf("ratelimit: key %q is neither provider.* nor tenant.*", key)
	}
}

// ProviderKey is the key of one provider and model. Characters a key may not hold are
// escaped, so model names like "llama3:8b" or "gpt-4.1" each get one key.
func ProviderKey(provider, model string) string {
	return "provider." + kv.Token(provider) + "." + kv.Token(model)
}

// TenantKey is the key of one tenant.
func TenantKey(tenant string) string { return "tenant." + kv.Token(tenant) }

// state is one key's stored value. Levels are as of the entry's server timestamp.
type state struct {
	Requests float64 `json:"requests"`
	Tokens   float64 `json:"tokens"`
	// PausedUntil is the server time before which no request may start (a 429 was seen).
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Slow scales the refill rates after a 429; 0 means 1 (full rate).
	Slow float64 `json:"slow,omitempty"`
}

func (s state) slow() float64 {
	if s.Slow <= 0 || s.Slow > 1 {
		return 1
	}
	return s.Slow
}

// full is the state of a key nobody has touched lately.
func full(r rule) state { return state{Requests: r.burst, Tokens: r.tokenBurst} }

// refill brings s from its timestamp at to now. Nothing refills while paused, so a key
// does not come out of a pause with a saved-up burst.
func (s *state) refill(r rule, at, now time.Time) {
	from := at
	if s.PausedUntil.After(from) {
		from = s.PausedUntil
	}
	if !now.After(from) {
		return
	}
	dt := now.Sub(from)
	k := s.slow() * dt.Minutes()
	if s.Requests < r.burst {
		s.Requests = min(r.burst, s.Requests+r.rpm*k)
	}
	if s.Tokens < r.tokenBurst {
		s.Tokens = min(r.tokenBurst, s.Tokens+r.tpm*k)
	}
	if s.Slow > 0 {
		s.Slow += float64(dt) / float64(recoverPeriod)
		if s.Slow >= 1 {
			s.Slow = 0
		}
	}
}

// Limiter applies Limits through the shared bucket. It is safe for concurrent use, and
// any number of Limiters in any number of processes may share one bucket.
type Limiter struct {
	kv     jetstream.KeyValue
	limits Limits
	clock  serverClock
}

// New opens (creating it if needed) the shared bucket and calibrates the server clock.
func New(ctx context.Context, js jetstream.JetStream, limits Limits) (*Limiter, error) {
	if limits.Bucket == "" {
		limits.Bucket = DefaultBucket
	}
	// Memory storage: the state is worth seconds; after a server restart every key reads
	// as full, which is one burst, not a quota violation worth disk writes per call.
	var bucket jetstream.KeyValue
	// Asked again when a cluster leaves it unanswered (instances starting together).
	err := bus.RetryTransient(ctx, func(ctx context.Context) error {
		var err error
		bucket, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: limits.Bucket, Description: "shared judge rate limits", History: 1,
			TTL: idleTTL, Storage: jetstream.MemoryStorage, Replicas: max(limits.Replicas, 1),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ratelimit bucket %s: %w", limits.Bucket, err)
	}
	l := &Limiter{kv: bucket, limits: limits}
	// A write and a read give one server timestamp to start the clock from. A bucket just
	// created on a cluster may have no leader yet: both are asked again, like the creation.
	var e jetstream.KeyValueEntry
	err = bus.RetryTransient(ctx, func(ctx context.Context) error {
		if _, err := bucket.Put(ctx, "clock", nil); err != nil {
			return err
		}
		var err error
		e, err = bucket.Get(ctx, "clock")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ratelimit clock: %w", err)
	}
	l.clock.observe(e.Created())
	return l, nil
}

// Limits returns the limits the Limiter applies.
func (l *Limiter) Limits() Limits { return l.limits }

// Wait blocks until key's bucket holds requests requests and tokens tokens (each capped
// at its burst, so an oversized ask waits for a full bucket rather than forever) and the
// key is not paused, then takes them. Limits that are zero for key are not checked; a
// pause is checked always. It returns early, wrapping context.DeadlineExceeded, when
// ctx's deadline would pass before the bucket could allow the call.
func (l *Limiter) Wait(ctx context.Context, key string, requests, tokens int) error {
	r, err := l.limits.rule(key)
	if err != nil {
		return err
	}
	for {
		st, rev, now, err := l.load(ctx, key, r)
		if err != nil {
			return err
		}
		var wait time.Duration
		if now.Before(st.PausedUntil) {
			wait = st.PausedUntil.Sub(now)
		} else {
			if r.rpm > 0 {
				if need := min(float64(requests), r.burst); st.Requests < need {
					wait = max(wait, minutes((need-st.Requests)/(r.rpm*st.slow())))
				}
			}
			if r.tpm > 0 {
				if need := min(float64(tokens), r.tokenBurst); st.Tokens < need {
					wait = max(wait, minutes((need-st.Tokens)/(r.tpm*st.slow())))
				}
			}
		}
		if wait <= 0 {
			if r.rpm <= 0 && r.tpm <= 0 {
				return nil // nothing to take; only the pause mattered
			}
			if r.rpm > 0 {
				st.Requests -= float64(requests)
			}
			if r.tpm > 0 {
				st.Tokens -= float64(tokens)
			}
			ok, err := l.save(ctx, key, st, rev)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
			continue // another instance wrote first: look again
		}
		if dl, has := ctx.Deadline(); has && time.Until(dl) < wait {
			return fmt.Errorf("ratelimit %s: a wait of %s would pass the deadline: %w", key, wait.Round(time.Millisecond), context.DeadlineExceeded)
		}
		if err := ctxtime.Sleep(ctx, min(wait, maxSleep)+jitter(wait)); err != nil {
			return fmt.Errorf("ratelimit %s: %w", key, err)
		}
	}
}

// Charge debits tokens actually used from key's token bucket, after the call, when the
// provider has reported usage. The bucket may go negative, which delays later callers
// until refill pays the debt. A negative tokens refunds an over-reservation (up to the
// burst). It does nothing when key has no token limit.
func (l *Limiter) Charge(ctx context.Context, key string, tokens int) error {
	r, err := l.limits.rule(key)
	if err != nil || r.tpm <= 0 || tokens == 0 {
		return err
	}
	return l.modify(ctx, key, r, func(st *state, _ time.Time) {
		st.Tokens = min(st.Tokens-float64(tokens), max(st.Tokens, r.tokenBurst))
	})
}

// Backoff records that the provider behind key answered 429: every instance pauses key
// for retryAfter (a longer pause already recorded stands), and the key's rates halve,
// down to an eighth, climbing back to full over a minute. 429s arriving while the key is
// already paused come from calls started before the pause and do not halve again.
func (l *Limiter) Backoff(ctx context.Context, key string, retryAfter time.Duration) error {
	r, err := l.limits.rule(key)
	if err != nil {
		return err
	}
	return l.modify(ctx, key, r, func(st *state, now time.Time) {
		if !now.Before(st.PausedUntil) {
			st.Slow = max(st.slow()/2, minSlow)
		}
		if until := now.Add(retryAfter); until.After(st.PausedUntil) {
			st.PausedUntil = until
		}
		// No saved-up burst right after the pause.
		st.Requests = min(st.Requests, 0)
	})
}

// modify applies f to key's current state with compare-and-set, retrying conflicts.
func (l *Limiter) modify(ctx context.Context, key string, r rule, f func(*state, time.Time)) error {
	for {
		st, rev, now, err := l.load(ctx, key, r)
		if err != nil {
			return err
		}
		f(&st, now)
		ok, err := l.save(ctx, key, st, rev)
		if err != nil || ok {
			return err
		}
	}
}

// load reads key's state refilled to the estimated server now; revision 0 means the key
// does not exist.
func (l *Limiter) load(ctx context.Context, key string, r rule) (state, uint64, time.Time, error) {
	// A cluster electing the bucket's leader leaves reads unanswered for a moment; the
	// call waits that out rather than end its AC as if the provider were down.
	var e jetstream.KeyValueEntry
	err := bus.RetryTransient(ctx, func(ctx context.Context) error {
		var err error
		e, err = l.kv.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return full(r), 0, l.clock.now(), nil
	}
	if err != nil {
		return state{}, 0, time.Time{}, fmt.Errorf("ratelimit %s: %w", key, err)
	}
	l.clock.observe(e.Created())
	now := l.clock.now()
	var st state
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		// Unreadable state is overwritten with a full bucket rather than wedging the key.
		return full(r), e.Revision(), now, nil
	}
	st.refill(r, e.Created(), now)
	return st, e.Revision(), now, nil
}

// save writes st if key is still at rev; false means another writer came first.
func (l *Limiter) save(ctx context.Context, key string, st state, rev uint64) (bool, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return false, err
	}
	err = bus.RetryUnapplied(ctx, func(ctx context.Context) error { return kv.CompareAndSet(ctx, l.kv, key, data, rev) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || kv.IsConflict(err):
		return false, nil
	default:
		return false, fmt.Errorf("ratelimit %s: %w", key, err)
	}
}

// serverClock estimates the NATS server's current time from entry timestamps. Every
// entry was written no later than it was read, so its timestamp is a lower bound of the
// server's time at the read; the estimate keeps the highest such bound and advances it
// by the local monotonic clock.
type serverClock struct {
	mu     sync.Mutex
	server time.Time // a server time known to have passed at local
	local  time.Time // local reading (monotonic) when server was observed
}

func (c *serverClock) observe(created time.Time) {
	at := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server.IsZero() || created.After(c.server.Add(at.Sub(c.local))) {
		c.server, c.local = created, at
	}
}

func (c *serverClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server.Add(time.Since(c.local))
}

func minutes(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }

// jitter spreads instances that computed the same wait, so they do not all come back at
// the same instant and fight over one revision.
func jitter(wait time.Duration) time.Duration {
	return rand.N(wait/10 + 5*time.Millisecond)
}
