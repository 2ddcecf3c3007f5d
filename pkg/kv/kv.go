// Package kv is the key-value bucket as tribunal's records, views and caches see it: one
// small interface, the compare-and-set every read-modify-write ends with, and the set of
// buckets the services open. It is a leaf: the readers of records import it without the
// bus, its router and the embedded server. JetStream's buckets satisfy KV, and so does the
// in-memory bucket of the handler tests (internal/testutil/memkv).
package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// KV is the part of a JetStream key-value bucket tribunal's records, views and caches
// use. jetstream.KeyValue satisfies it; so does the in-memory bucket the handler tests
// run on (internal/testutil/memkv), which lets a service's decisions be tested without a
// broker. Its errors follow jetstream's: a missing key is jetstream.ErrKeyNotFound, a
// Create over a live key jetstream.ErrKeyExists, and a stale Update something IsConflict
// recognises.
type KV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	// Watch delivers the current value of every key matching keys, then nil, then later
	// changes. tribunal passes jetstream.IgnoreDeletes and reads up to the nil.
	Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
	// ListKeysFiltered delivers the keys matching any of filters, without their values.
	ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error)
}

var _ KV = jetstream.KeyValue(nil)

// Buckets are the key-value buckets the services open (bus.OpenBuckets).
type Buckets struct {
	Jobs    KV
	Batches KV
	Cache   KV
	Views   KV
	// JS is the JetStream the buckets were opened on, nil for in-memory buckets. A
	// reader that must see every key of a prefix reads the bucket's stream through it
	// (records.Store.EachJob): a watch's "initial values done" can come early when its
	// ordered consumer is reset, and the read silently ends short.
	JS jetstream.JetStream
}

// CompareAndSet stores value under key only if the key is still at rev, 0 meaning that it
// does not exist yet: the write that ends every read-modify-write of a record. Another
// writer having come first is an error IsConflict recognises.
func CompareAndSet(ctx context.Context, kv KV, key string, value []byte, rev uint64) error {
	var err error
	if rev == 0 {
		_, err = kv.Create(ctx, key, value)
	} else {
		_, err = kv.Update(ctx, key, value, rev)
	}
	return err
}

// IsConflict reports a compare-and-set that lost to a concurrent writer. A replicated
// (R>1) stream reports the conflict with its own error code, so both codes count.
func IsConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// Token writes a name as exactly one key token: it keeps [A-Za-z0-9_-] and writes every
// other byte as =XX, and the empty name as "=". Names from teams (tenants, batches,
// models) can hold dots and wildcards, which would split or widen a key.
func Token(s string) string {
	if s == "" {
		return "="
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}
