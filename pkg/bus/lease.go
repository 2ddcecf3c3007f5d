package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// BucketLeases holds the leases of Elect: one key per elected role, the holder's name as
// value, and the bucket's max age as the lease's time to live.
const BucketLeases = "tribunal_leases"

// DefaultLeaseTTL is how long a lease outlives a holder that stopped renewing it (a
// crashed process); the holder renews at a third of it.
const DefaultLeaseTTL = 15 * time.Second

// LeaseConfig describes one role to elect a holder for.
type LeaseConfig struct {
	// Key names the role ("pending.judge"); every contender uses the same key.
	Key string
	// Holder names this contender; it must be unique among them.
	Holder string
	// TTL is DefaultLeaseTTL when zero. Every contender must use the same TTL: the first
	// to create the bucket fixes it.
	TTL time.Duration
	// Replicas is the lease bucket's replication on a JetStream cluster (as Config's),
	// so losing one server does not lose the elections with it.
	Replicas int
	// Logger receives the lease's changes of hands (default slog.Default()).
	Logger *slog.Logger
}

// Lease elects at most one holder among the processes contending for a key through a
// JetStream key-value bucket: the holder is whoever created the key, it renews the key
// by compare-and-set, and the key expires with the bucket's max age when the holder
// stops renewing, so another contender takes over. Two processes can both believe they
// hold it only for the moment between one's expiry and its next failed renewal (at most
// a third of the TTL); what it guards must tolerate that (tribunal uses it for which
// instance exports a metric).
type Lease struct {
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	cfg   LeaseConfig
	held  atomic.Bool
	rev   uint64
	stop  chan struct{}
	done  chan struct{}
	close sync.Once
}

// Elect joins the contest for cfg.Key and keeps contending (or renewing) in the
// background until Close. It returns once the first attempt is made, so a lone contender
// holds the lease on return. A lease bucket that cannot be opened yet (a cluster short
// of the servers it needs) is not an error: the lease is simply not held, and every
// later attempt tries the bucket again, because what a lease guards must never stop a
// service from starting.
func Elect(ctx context.Context, js jetstream.JetStream, cfg LeaseConfig) (*Lease, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Lease{js: js, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	l.try(ctx)
	go l.run()
	return l, nil
}

// bucket opens the lease bucket, creating it on first use.
func (l *Lease) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if l.kv != nil {
		return l.kv, nil
	}
	// A cluster may leave the request unanswered for a while (an election): the next
	// attempt asks again, rather than one attempt holding up a service's start.
	ctx, cancel := context.WithTimeout(ctx, l.cfg.TTL/3)
	defer cancel()
	kv, err := l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BucketLeases, Description: "tribunal leases (bus.Elect)",
		History: 1, TTL: l.cfg.TTL, Storage: jetstream.MemoryStorage, Replicas: max(l.cfg.Replicas, 1)})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = l.js.KeyValue(ctx, BucketLeases)
	}
	if err != nil {
		return nil, fmt.Errorf("lease bucket %s: %w", BucketLeases, err)
	}
	l.kv = kv
	return kv, nil
}

// Held reports whether this process holds the lease now.
func (l *Lease) Held() bool { return l.held.Load() }

func (l *Lease) run() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.TTL/3)
			l.try(ctx)
			cancel()
		}
	}
}

// try renews a held lease or takes a free one.
func (l *Lease) try(ctx context.Context) {
	was := l.held.Load()
	bucket, err := l.bucket(ctx)
	if err != nil {
		l.held.Store(false)
		l.cfg.Logger.Debug("lease bucket unavailable", "key", l.cfg.Key, "err", err)
		return
	}
	var rev uint64
	if was {
		rev, err = bucket.Update(ctx, l.cfg.Key, []byte(l.cfg.Holder), l.rev)
	} else {
		rev, err = bucket.Create(ctx, l.cfg.Key, []byte(l.cfg.Holder))
	}
	now := err == nil
	if now {
		l.rev = rev
	}
	l.held.Store(now)
	if now != was {
		l.cfg.Logger.Debug("lease changed hands", "key", l.cfg.Key, "holder", l.cfg.Holder, "held", now)
	}
	if err != nil && !kv.IsConflict(err) {
		l.cfg.Logger.Debug("lease not renewed", "key", l.cfg.Key, "err", err)
	}
}

// Close stops contending and, if this process holds the lease, releases it so another
// contender takes over at its next attempt instead of after the TTL.
func (l *Lease) Close() {
	l.close.Do(func() {
		close(l.stop)
		<-l.done
		if l.held.Swap(false) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = l.kv.Delete(ctx, l.cfg.Key, jetstream.LastRevision(l.rev))
		}
	})
}
