package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// ShardSize is how many jobs one completion shard tracks. A batch's completion state is
// split so that concurrent aggregators contend on 1/ShardSize of the batch, and each
// update rewrites ShardSize/8 bytes, not the whole batch.
const ShardSize = 1024

// BatchHeader is a batch's record in the batches bucket, keyed "<tenant>.<batch>".
type BatchHeader struct {
	Tenant    string    `json:"tenant"`
	Batch     string    `json:"batch"`
	Size      int       `json:"size"`
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// DoneShards has one bit per full shard.
	DoneShards []byte `json:"done_shards"`
	// Completion is set by the aggregator whose update completed the batch, and replaced
	// when a redrive completes it again.
	Completion *Completion `json:"completion,omitempty"`
	// Redrive is the redrive in progress: its attempt and the jobs still to decide.
	Redrive *Redrive `json:"redrive,omitempty"`
}

// Redrive tracks one `tribunal redrive` of a batch's blocked jobs.
type Redrive struct {
	Attempt int      `json:"attempt"`
	Pending []string `json:"pending"`
}

// Completion is the outcome of a finished batch.
type Completion struct {
	At          time.Time             `json:"at"`
	By          string                `json:"by"`
	Summary     events.BatchCompleted `json:"summary"`
	ManifestRef *events.Blob          `json:"manifest,omitempty"`
	// Manifests holds every manifest of the batch by judge kind.
	Manifests map[string]events.Blob `json:"manifests,omitempty"`
	// Digest chains every event the batch's outcomes were derived from (BatchDigest).
	Digest string `json:"digest,omitempty"`
	// Attempt is the redrive attempt this completion is for (0: the first pass).
	Attempt int `json:"attempt,omitempty"`
}

// BatchKey is a batch header's key.
func BatchKey(tenant, batch string) string { return tenant + "." + batch }

// ShardKey is a completion shard's key.
func ShardKey(tenant, batch string, shard int) string {
	return tenant + "." + batch + ".s" + strconv.Itoa(shard)
}

// ShardCount is the number of shards of a batch of size n.
func ShardCount(n int) int { return (n + ShardSize - 1) / ShardSize }

func shardLen(size, shard int) int { return min(ShardSize, size-shard*ShardSize) }

// Popcount counts the set bits of a shard or header bitmap.
func Popcount(b []byte) int {
	n := 0
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return n
}

func setBit(b []byte, i int) ([]byte, bool) {
	need := i/8 + 1
	if len(b) < need {
		b = append(b, make([]byte, need-len(b))...)
	}
	if b[i/8]&(1<<(i%8)) != 0 {
		return b, false
	}
	b[i/8] |= 1 << (i % 8)
	return b, true
}

// ensureHeader creates the batch header if it does not exist yet.
func ensureHeader(ctx context.Context, kv jetstream.KeyValue, h BatchHeader) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, BatchKey(h.Tenant, h.Batch), data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("create batch %s: %w", BatchKey(h.Tenant, h.Batch), err)
	}
	return nil
}

// casBytes applies change to a raw value with compare-and-set, creating the key when
// absent. change returns the new value and whether anything changed.
func casBytes(ctx context.Context, kv jetstream.KeyValue, key string, change func([]byte) ([]byte, bool)) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		var cur []byte
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("load %s: %w", key, err)
		default:
			cur, rev = append([]byte(nil), e.Value()...), e.Revision()
		}
		next, changed := change(cur)
		if !changed {
			return next, nil
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, next)
		} else {
			_, err = kv.Update(ctx, key, next, rev)
		}
		if err == nil {
			return next, nil
		}
		if !bus.IsConflict(err) || attempt > 100 {
			return nil, fmt.Errorf("update %s: %w", key, err)
		}
	}
}

// markDone records that job index of a batch is final and reports whether the whole
// batch is now final. Every step is an idempotent bit-set, so a redelivered event that
// repeats it changes nothing and still reaches the same answer.
func markDone(ctx context.Context, kv jetstream.KeyValue, tenant, batch string, index, size int) (bool, error) {
	shard := index / ShardSize
	bitmap, err := casBytes(ctx, kv, ShardKey(tenant, batch, shard), func(b []byte) ([]byte, bool) {
		return setBit(b, index%ShardSize)
	})
	if err != nil {
		return false, err
	}
	if Popcount(bitmap) < shardLen(size, shard) {
		return false, nil
	}
	var header BatchHeader
	_, err = casBytes(ctx, kv, BatchKey(tenant, batch), func(b []byte) ([]byte, bool) {
		header = BatchHeader{}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &header); err != nil {
				return b, false
			}
		} else {
			header = BatchHeader{Tenant: tenant, Batch: batch, Size: size, CreatedAt: time.Now().UTC()}
		}
		var changed bool
		header.DoneShards, changed = setBit(header.DoneShards, shard)
		if !changed {
			return b, false
		}
		out, _ := json.Marshal(header)
		return out, true
	})
	if err != nil {
		return false, err
	}
	return Popcount(header.DoneShards) >= ShardCount(size), nil
}

// LoadHeader reads a batch header, or nil when the batch is unknown.
func LoadHeader(ctx context.Context, kv jetstream.KeyValue, tenant, batch string) (*BatchHeader, uint64, error) {
	e, err := kv.Get(ctx, BatchKey(tenant, batch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load batch %s: %w", BatchKey(tenant, batch), err)
	}
	var h BatchHeader
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return nil, 0, fmt.Errorf("batch %s: corrupt header: %w", BatchKey(tenant, batch), err)
	}
	return &h, e.Revision(), nil
}

// Progress counts the final jobs of a batch from its shards.
func Progress(ctx context.Context, kv jetstream.KeyValue, tenant, batch string, size int) (int, error) {
	done := 0
	for s := 0; s < ShardCount(size); s++ {
		e, err := kv.Get(ctx, ShardKey(tenant, batch, s))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("load shard %d of %s: %w", s, BatchKey(tenant, batch), err)
		}
		done += Popcount(e.Value())
	}
	return done, nil
}

// StartRedrive records a redrive of jobs as attempt on the batch header, so the
// aggregator knows when the redrive is complete. It fails when the batch is not complete
// or another redrive is still running.
func StartRedrive(ctx context.Context, kv jetstream.KeyValue, tenant, batch string, attempt int, jobs []string) error {
	var refuse error
	_, err := casBytes(ctx, kv, BatchKey(tenant, batch), func(b []byte) ([]byte, bool) {
		var h BatchHeader
		if len(b) == 0 || json.Unmarshal(b, &h) != nil {
			refuse = fmt.Errorf("batch %s: not found", BatchKey(tenant, batch))
			return b, false
		}
		switch {
		case h.Completion == nil:
			refuse = fmt.Errorf("batch %s is still running", BatchKey(tenant, batch))
			return b, false
		case h.Redrive != nil && len(h.Redrive.Pending) > 0 && (h.Completion.Attempt < h.Redrive.Attempt):
			refuse = fmt.Errorf("batch %s: redrive %d is still running", BatchKey(tenant, batch), h.Redrive.Attempt)
			return b, false
		}
		h.Redrive = &Redrive{Attempt: attempt, Pending: jobs}
		out, _ := json.Marshal(h)
		return out, true
	})
	if err != nil {
		return err
	}
	return refuse
}
