package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/ctxtime"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// QuotaBucket is the key-value bucket where the ingress replicas of a deployment reserve
// what each team's requests open, one value a team ("acs.<team>"), changed only by
// compare-and-set. Counting a team's batch headers is not enough on its own: a header
// is recorded by the aggregator after the request that opens its batch is answered, so
// two requests at once, on one ingress or on two, would each count the other's batch
// as not there yet and both pass.
const QuotaBucket = "tribunal_quota"

// ledgerKey is a team's key in QuotaBucket.
func ledgerKey(tenant string) string { return "acs." + kv.Token(tenant) }

// reservations is one team's value in the ledger: the batches its requests opened, each
// at the largest size any request claimed for it.
type reservations struct {
	Batches map[string]reservation `json:"batches,omitempty"`
}

// reservation is one batch a request opened: the size claimed, and when it was last
// raised (a batch no header records is let go openedTTL after it).
type reservation struct {
	Size int       `json:"size"`
	At   time.Time `json:"at"`
}

// ledger keeps every team's reservations.
type ledger interface {
	// modify applies change to tenant's reservations, atomically against every other
	// modify of the same team wherever it runs; change reports whether to write. It is
	// called again when another writer came first.
	modify(ctx context.Context, tenant string, change func(*reservations) (bool, error)) error
}

// localLedger is the ledger of an ingress that has no JetStream to share one on (an
// in-memory bucket set): one process, so a mutex makes it atomic.
type localLedger struct {
	mu    sync.Mutex
	teams map[string]*reservations
}

func (l *localLedger) modify(_ context.Context, tenant string, change func(*reservations) (bool, error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.teams == nil {
		l.teams = map[string]*reservations{}
	}
	cur := l.teams[tenant]
	if cur == nil {
		cur = &reservations{}
	}
	next := reservations{Batches: map[string]reservation{}}
	for b, r := range cur.Batches {
		next.Batches[b] = r
	}
	write, err := change(&next)
	if err != nil || !write {
		return err
	}
	l.teams[tenant] = &next
	return nil
}

// openTimeout bounds opening QuotaBucket for one request.
const openTimeout = 20 * time.Second

// kvLedger is the ledger in QuotaBucket, shared by every ingress replica.
type kvLedger struct {
	mu   sync.Mutex
	kv   kv.KV
	open func(context.Context) (kv.KV, error)
}

// newKVLedger opens QuotaBucket on js on first use (creating it, on file storage with
// replicas copies, so what is in flight outlives a restart of the server). A bucket that
// cannot be opened fails the request that needed it, and is tried again by the next: a
// quota that cannot be shared is not held by one replica alone.
func newKVLedger(js jetstream.JetStream, replicas int) *kvLedger {
	return &kvLedger{open: func(ctx context.Context) (kv.KV, error) {
		// A request the server never answers (a NATS user without the bucket's rights
		// gets no reply, only a permissions violation) would otherwise be retried for as
		// long as the team's request lasts.
		ctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		var b jetstream.KeyValue
		err := bus.RetryTransient(ctx, func(ctx context.Context) error {
			var err error
			b, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: QuotaBucket, Description: "ingress quotas: the batches each team's requests opened, and their sizes", History: 1,
				Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("quota bucket %s (the ingress's NATS user needs its rights: tribunal tenants writes them): %w", QuotaBucket, err)
		}
		return b, nil
	}}
}

func (l *kvLedger) bucket(ctx context.Context) (kv.KV, error) {
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

func (l *kvLedger) modify(ctx context.Context, tenant string, change func(*reservations) (bool, error)) error {
	b, err := l.bucket(ctx)
	if err != nil {
		return err
	}
	key := ledgerKey(tenant)
	for attempt := 0; ; attempt++ {
		var e jetstream.KeyValueEntry
		err := bus.RetryTransient(ctx, func(ctx context.Context) error {
			var err error
			e, err = b.Get(ctx, key)
			return err
		})
		var cur reservations
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("quota %s: %w", key, err)
		default:
			// An unreadable value refuses the request rather than count the team as
			// holding nothing.
			if err := json.Unmarshal(e.Value(), &cur); err != nil {
				return fmt.Errorf("quota %s: unreadable value: %w", key, err)
			}
			rev = e.Revision()
		}
		if cur.Batches == nil {
			cur.Batches = map[string]reservation{}
		}
		write, err := change(&cur)
		if err != nil || !write {
			return err
		}
		data, err := json.Marshal(cur)
		if err != nil {
			return fmt.Errorf("quota %s: %w", key, err)
		}
		err = bus.RetryUnapplied(ctx, func(ctx context.Context) error { return kv.CompareAndSet(ctx, b, key, data, rev) })
		switch {
		case err == nil:
			return nil
		case !kv.IsConflict(err):
			return fmt.Errorf("quota %s: %w", key, err)
		}
		// Another request of the team came first: count again with its reservation. Spread
		// out after a few, so requests that keep colliding do not retry in lockstep.
		if attempt >= 2 {
			if err := ctxtime.Sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 20))*int64(200*time.Microsecond)))); err != nil {
				return fmt.Errorf("quota %s: %w", key, err)
			}
		}
	}
}
