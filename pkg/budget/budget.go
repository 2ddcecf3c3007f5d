// Package budget stops spending at a budget: a batch's (`budget:` in the batch file) and
// a team's per period (`--tenant-budget`), shared by every judge instance the way the
// rate limits are (pkg/ratelimit): each budget is one small JSON value in a JetStream
// key-value bucket, changed only by compare-and-set on its revision.
//
// Before a call, its estimate (every prompt byte a token, the whole answer token limit,
// at the model's price) is reserved from every budget the call is charged to; a budget
// whose spent plus reserved money (or tokens) would pass its limit with the estimate
// refuses, and no request is sent. After the call, the reservation is settled with what
// the provider reported. Concurrent judges therefore cannot overspend together: each
// reservation is made against the others' reservations, and an estimate is never less
// than what the call can cost. The price of that guarantee is the end of a budget: the
// last calls are refused when their estimate does not fit, though what they would have
// cost might have.
//
// A reservation carries an expiry, past the longest its call can take (HoldFor): one
// whose judge died before settling is reclaimed then, so a restart does not leak it for
// good, and until then the budget refuses early rather than late. A money budget cannot be kept for a model the price table does
// not price, so such a call is refused too.
package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// DefaultBucket is the key-value bucket of the budgets.
const DefaultBucket = "tribunal_budget"

// Amount is money and tokens together: what a call is estimated at or cost.
type Amount struct {
	Money  price.Money `json:"nano_usd"`
	Tokens int64       `json:"tokens"`
}

// Scope is one budget a call is charged to.
type Scope struct {
	// Key names the budget in the bucket (BatchKey, TenantKey).
	Key string
	// Limit is its size.
	Limit price.Limit
	// What names it in refusals: "the batch's budget", "team a's budget for 2026-12".
	What string
}

// BatchKey is the key of a batch's budget.
func BatchKey(tenant, batch string) string {
	return "batch." + kv.Token(tenant) + "." + kv.Token(batch)
}

// TenantKey is the key of a team's budget in the period starting with period (Period).
func TenantKey(tenant, period string) string {
	return "tenant." + kv.Token(tenant) + "." + kv.Token(period)
}

// DefaultHoldFor is how long a direct call's reservation lasts when its judge never
// settles it: far past a call's timeouts, retries and rate-limit waits.
const DefaultHoldFor = time.Hour

// holdSteps is how many expiry groups one reservation's lifetime is cut into: the
// reservations expiring in the same step share one entry, so a budget's value stays a
// few dozen entries however many calls are in flight.
const holdSteps = 12

// state is one budget's stored value.
type state struct {
	Spent Amount `json:"spent"`
	// Reserved is the sum of Holds, what the calls in flight may still cost.
	Reserved Amount `json:"reserved"`
	// Holds are the reservations by the Unix second they expire at (a step's end, so
	// each lasts at least its HoldFor); an expired one is dropped when the value is read.
	Holds map[string]Amount `json:"holds,omitempty"`
	// Calls counts settled calls; Refused the calls the budget refused.
	Calls   int `json:"calls"`
	Refused int `json:"refused,omitempty"`
}

// Ledger keeps the budgets in a key-value bucket. It is safe for concurrent use, and any
// number of Ledgers in any number of processes may share one bucket.
type Ledger struct {
	mu   sync.Mutex
	kv   kv.KV
	open func(context.Context) (kv.KV, error)
	// Now is the clock reservations expire on; nil is time.Now.
	Now func() time.Time
}

func (l *Ledger) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// expiry is the hold key of a reservation made at now lasting holdFor: the end of the
// step holding now+holdFor.
func expiry(now time.Time, holdFor time.Duration) string {
	if holdFor <= 0 {
		holdFor = DefaultHoldFor
	}
	step := max(holdFor/holdSteps, time.Minute)
	end := now.Add(holdFor).Truncate(step).Add(step)
	return fmt.Sprint(end.Unix())
}

// prune drops st's expired holds and sums the rest into Reserved. A value written before
// holds existed keeps its reserved amount, now expiring DefaultHoldFor from now.
func (st *state) prune(now time.Time) {
	if len(st.Holds) == 0 {
		if st.Reserved != (Amount{}) {
			st.Holds = map[string]Amount{expiry(now, DefaultHoldFor): st.Reserved}
		}
		return
	}
	st.Reserved = Amount{}
	for k, a := range st.Holds {
		var end int64
		if _, err := fmt.Sscan(k, &end); err != nil || end <= now.Unix() || a == (Amount{}) {
			delete(st.Holds, k)
			continue
		}
		st.Reserved.Money += a.Money
		st.Reserved.Tokens += a.Tokens
	}
}

// Open opens (creating it if needed) the budgets' bucket on js. The bucket is on file
// storage: what a team has spent this month must outlive a restart of the server.
func Open(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*Ledger, error) {
	l := Lazy(js, bucket, replicas)
	if _, err := l.bucket(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Lazy is Open deferred to the first budget a call is charged to: a process whose calls no
// budget covers never creates the bucket, so a deployment whose NATS users were written
// before budgets existed keeps starting (a call that needs the bucket and cannot have it
// is refused, never made unchecked).
func Lazy(js jetstream.JetStream, bucket string, replicas int) *Ledger {
	if bucket == "" {
		bucket = DefaultBucket
	}
	return &Ledger{open: func(ctx context.Context) (kv.KV, error) {
		var b jetstream.KeyValue
		err := bus.RetryTransient(ctx, func(ctx context.Context) error {
			var err error
			b, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: bucket, Description: "judge budgets: spent and reserved per batch and per team and period", History: 1,
				Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("budget bucket %s: %w", bucket, err)
		}
		return b, nil
	}}
}

// New is a ledger on bucket b.
func New(b kv.KV) *Ledger { return &Ledger{kv: b} }

// bucket is the ledger's bucket, opened on first use (a failure is tried again next
// time).
func (l *Ledger) bucket(ctx context.Context) (kv.KV, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv == nil {
		b, err := l.open(ctx)
		if err != nil {
			return nil, err
		}
		l.kv = b
	}
	return l.kv, nil
}

// Hold is a reservation Reserve made, for Settle.
type Hold struct {
	scopes []Scope
	est    Amount
	// expires is the hold key est was reserved under.
	expires string
}

// Refusal is a budget's refusal of a call: its Error is the reason a job is blocked
// with, "budget exhausted: ...", and it is judge.ErrBudgetExhausted for errors.Is.
type Refusal struct {
	Scope Scope
	// Spent and Reserved are the budget's at the refusal, Estimate the refused call's.
	Spent, Reserved, Estimate Amount
	// Unpriced names the model of a money budget's call the table has no price for.
	Unpriced string
}

// Error implements error.
func (r *Refusal) Error() string {
	if r.Unpriced != "" {
		return fmt.Sprintf("budget exhausted: %s is %s and model %s has no price, so the call could not be kept within it (give it one with --price)",
			r.Scope.What, r.Scope.Limit, r.Unpriced)
	}
	if r.Scope.Limit.Tokens > 0 {
		return fmt.Sprintf("budget exhausted: %s is %d tokens; %d spent, %d reserved by calls in flight, and the next call may take up to %d",
			r.Scope.What, r.Scope.Limit.Tokens, r.Spent.Tokens, r.Reserved.Tokens, r.Estimate.Tokens)
	}
	return fmt.Sprintf("budget exhausted: %s is %s; %s spent, %s reserved by calls in flight, and the next call may cost up to %s",
		r.Scope.What, r.Scope.Limit, r.Spent.Money, r.Reserved.Money, r.Estimate.Money)
}

// Is makes a refusal judge.ErrBudgetExhausted, and so of that sentinel's class (Refused).
func (r *Refusal) Is(target error) bool { return errors.Is(judge.ErrBudgetExhausted, target) }

// over reports whether adding est to st passes limit.
func over(limit price.Limit, st state, est Amount) bool {
	if limit.Tokens > 0 {
		return st.Spent.Tokens+st.Reserved.Tokens+est.Tokens > limit.Tokens
	}
	return st.Spent.Money+st.Reserved.Money+est.Money > limit.Money
}

// Reserve reserves est from every scope, or from none: the first scope it does not fit
// refuses (a *Refusal), and what was reserved from the scopes before it is given back.
// The reservation expires holdFor from now (at most a step later; 0 is DefaultHoldFor)
// if it has not been settled: holdFor must pass the longest the call can take.
func (l *Ledger) Reserve(ctx context.Context, scopes []Scope, est Amount, holdFor time.Duration) (*Hold, error) {
	exp := expiry(l.now(), holdFor)
	for i, sc := range scopes {
		var refusal *Refusal
		err := l.modify(ctx, sc.Key, func(st *state) bool {
			refusal = nil // f runs again after a lost compare-and-set
			if over(sc.Limit, *st, est) {
				st.Refused++
				refusal = &Refusal{Scope: sc, Spent: st.Spent, Reserved: st.Reserved, Estimate: est}
				return true // the refusal is counted
			}
			st.Reserved.Money += est.Money
			st.Reserved.Tokens += est.Tokens
			if st.Holds == nil {
				st.Holds = map[string]Amount{}
			}
			h := st.Holds[exp]
			h.Money += est.Money
			h.Tokens += est.Tokens
			st.Holds[exp] = h
			return true
		})
		if err == nil && refusal != nil {
			err = refusal
		}
		if err != nil {
			l.release(ctx, scopes[:i], est, exp, Amount{}, false)
			return nil, err
		}
	}
	return &Hold{scopes: scopes, est: est, expires: exp}, nil
}

// Settle replaces h's reservation with what the call actually used. It must be called
// once for every hold, even for a call that failed (used is then what the provider
// reported, usually nothing). It keeps trying after ctx ends, for a few seconds: an
// unsettled reservation would hold the budget back.
func (l *Ledger) Settle(ctx context.Context, h *Hold, used Amount) error {
	if h == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return l.release(sctx, h.scopes, h.est, h.expires, used, true)
}

// release gives est, reserved under the hold key exp, back to every scope (nothing when
// that hold has expired already) and adds used to what they spent.
func (l *Ledger) release(ctx context.Context, scopes []Scope, est Amount, exp string, used Amount, settled bool) error {
	var errs []error
	for _, sc := range scopes {
		err := l.modify(ctx, sc.Key, func(st *state) bool {
			if h, ok := st.Holds[exp]; ok {
				h.Money = max(h.Money-est.Money, 0)
				h.Tokens = max(h.Tokens-est.Tokens, 0)
				st.Holds[exp] = h
				st.prune(l.now())
			}
			st.Spent.Money += used.Money
			st.Spent.Tokens += used.Tokens
			if settled {
				st.Calls++
			}
			return true
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("budget %s: settle: %w", sc.Key, err))
		}
	}
	return errors.Join(errs...)
}

// Status is a budget as it stands.
type Status struct {
	Spent, Reserved Amount
	Calls, Refused  int
}

// Status reads a budget (zero for one never charged).
func (l *Ledger) Status(ctx context.Context, key string) (Status, error) {
	st, _, err := l.load(ctx, key)
	return Status{Spent: st.Spent, Reserved: st.Reserved, Calls: st.Calls, Refused: st.Refused}, err
}

// modify applies f to key's state with compare-and-set, retrying conflicts; f returns
// whether to write.
func (l *Ledger) modify(ctx context.Context, key string, f func(*state) bool) error {
	for {
		st, rev, err := l.load(ctx, key)
		if err != nil {
			return err
		}
		if !f(&st) {
			return nil
		}
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		b, err := l.bucket(ctx)
		if err != nil {
			return err
		}
		err = bus.RetryUnapplied(ctx, func(ctx context.Context) error { return kv.CompareAndSet(ctx, b, key, data, rev) })
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) || kv.IsConflict(err):
			continue // another judge wrote first: look again
		default:
			return fmt.Errorf("budget %s: %w", key, err)
		}
	}
}

func (l *Ledger) load(ctx context.Context, key string) (state, uint64, error) {
	b, err := l.bucket(ctx)
	if err != nil {
		return state{}, 0, err
	}
	// A cluster electing the bucket's leader leaves reads unanswered for a moment: wait
	// it out rather than refuse the call.
	var e jetstream.KeyValueEntry
	err = bus.RetryTransient(ctx, func(ctx context.Context) error {
		var err error
		e, err = b.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return state{}, 0, nil
	}
	if err != nil {
		return state{}, 0, fmt.Errorf("budget %s: %w", key, err)
	}
	var st state
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		// An unreadable budget is refused rather than read as unspent.
		return state{}, 0, fmt.Errorf("budget %s: unreadable state: %w", key, err)
	}
	st.prune(l.now())
	return st, e.Revision(), nil
}
