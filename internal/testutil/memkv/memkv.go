// Package memkv is an in-memory key-value bucket with the semantics tribunal relies on
// from JetStream's (revisions, create-if-absent, compare-and-set, wildcard watches), so a
// service's handlers can be tested without starting a broker. It implements kv.KV; the
// conformance test runs the same cases against it and a real bucket, so the two cannot
// drift apart.
package memkv

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// Bucket is one in-memory key-value bucket. The zero value is not usable; call New.
type Bucket struct {
	name string

	mu       sync.Mutex
	rev      uint64
	entries  map[string]*entry
	watchers map[*watcher]struct{}
}

var _ kv.KV = (*Bucket)(nil)

// New returns an empty bucket.
func New(name string) *Bucket {
	return &Bucket{name: name, entries: map[string]*entry{}, watchers: map[*watcher]struct{}{}}
}

// Buckets returns a fresh set of the buckets the services open.
func Buckets() bus.Buckets {
	return bus.Buckets{Jobs: New(bus.BucketJobs), Batches: New(bus.BucketBatches),
		Cache: New(bus.BucketCache), Views: New(bus.BucketViews)}
}

// Get implements kv.KV.
func (b *Bucket) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !validKey(key) {
		return nil, jetstream.ErrInvalidKey
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || e.op != jetstream.KeyValuePut {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, nil
}

// Put implements kv.KV.
func (b *Bucket) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return b.write(ctx, key, value, jetstream.KeyValuePut, func(*entry) error { return nil })
}

// Create implements kv.KV. Options (a per-key TTL) are accepted and ignored.
func (b *Bucket) Create(ctx context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	return b.write(ctx, key, value, jetstream.KeyValuePut, func(cur *entry) error {
		if cur != nil && cur.op == jetstream.KeyValuePut {
			return jetstream.ErrKeyExists
		}
		return nil
	})
}

// Update implements kv.KV: it writes only over revision, as JetStream's last-subject
// sequence check does, failing like the server when another write came first.
func (b *Bucket) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	return b.write(ctx, key, value, jetstream.KeyValuePut, func(cur *entry) error {
		if (cur == nil && revision != 0) || (cur != nil && cur.rev != revision) {
			return &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence,
				Description: "wrong last sequence"}
		}
		return nil
	})
}

// Delete implements kv.KV. Options (a last-revision check) are accepted and ignored.
func (b *Bucket) Delete(ctx context.Context, key string, _ ...jetstream.KVDeleteOpt) error {
	_, err := b.write(ctx, key, nil, jetstream.KeyValueDelete, func(*entry) error { return nil })
	return err
}

func (b *Bucket) write(ctx context.Context, key string, value []byte, op jetstream.KeyValueOp, check func(*entry) error) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !validKey(key) {
		return 0, jetstream.ErrInvalidKey
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := check(b.entries[key]); err != nil {
		return 0, err
	}
	b.rev++
	e := &entry{bucket: b.name, key: key, value: append([]byte(nil), value...), rev: b.rev,
		created: time.Now(), op: op}
	b.entries[key] = e
	if op == jetstream.KeyValuePut {
		for w := range b.watchers {
			if match(w.filter, key) {
				w.send(e)
			}
		}
	}
	return e.rev, nil
}

// Watch implements kv.KV: the current value of each matching key in revision order,
// then nil, then later puts. Deletes are never delivered, as with jetstream.IgnoreDeletes,
// the only option tribunal passes.
func (b *Bucket) Watch(ctx context.Context, keys string, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var now []*entry
	for k, e := range b.entries {
		if e.op == jetstream.KeyValuePut && match(keys, k) {
			now = append(now, e)
		}
	}
	slices.SortFunc(now, func(a, b *entry) int { return cmp.Compare(a.rev, b.rev) })
	w := &watcher{filter: keys, ch: make(chan jetstream.KeyValueEntry, len(now)+1+64), done: make(chan struct{})}
	for _, e := range now {
		w.ch <- e
	}
	w.ch <- nil
	b.watchers[w] = struct{}{}
	stop := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.watchers[w]; ok {
			delete(b.watchers, w)
			close(w.done)
		}
	}
	w.stop = stop
	context.AfterFunc(ctx, stop)
	return w, nil
}

// ListKeysFiltered implements kv.KV: the live keys matching any filter, in revision
// order.
func (b *Bucket) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var es []*entry
	for k, e := range b.entries {
		if e.op == jetstream.KeyValuePut && slices.ContainsFunc(filters, func(f string) bool { return match(f, k) }) {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.rev, b.rev) })
	ch := make(chan string, len(es))
	for _, e := range es {
		ch <- e.key
	}
	close(ch)
	return lister(ch), nil
}

type lister chan string

func (l lister) Keys() <-chan string { return l }
func (l lister) Stop() error         { return nil }

type watcher struct {
	filter string
	ch     chan jetstream.KeyValueEntry
	done   chan struct{}
	stop   func()
}

func (w *watcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }

func (w *watcher) Stop() error { w.stop(); return nil }

// send delivers a later change, dropping it when the reader is far behind: tests read a
// watch up to its nil marker, and a slow live reader must not block every writer.
func (w *watcher) send(e *entry) {
	select {
	case w.ch <- e:
	default:
	}
}

type entry struct {
	bucket  string
	key     string
	value   []byte
	rev     uint64
	created time.Time
	op      jetstream.KeyValueOp
}

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.rev }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return e.op }

// validKey follows the server's key rules: dot-separated non-empty tokens of letters,
// digits and -_/=. (wildcards are for filters only).
func validKey(key string) bool {
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return false
	}
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_/=.", r):
		default:
			return false
		}
	}
	return true
}

// match reports whether key matches a subject filter with * (one token) and > (the
// rest).
func match(filter, key string) bool {
	ft, kt := strings.Split(filter, "."), strings.Split(key, ".")
	for i, f := range ft {
		if f == ">" {
			return len(kt) > i
		}
		if i >= len(kt) || (f != "*" && f != kt[i]) {
			return false
		}
	}
	return len(ft) == len(kt)
}
