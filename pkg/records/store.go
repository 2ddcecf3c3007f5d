package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/kv"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotRecorded marks a job the jobs bucket does not hold (yet).
var ErrNotRecorded = errclass.New(errclass.NotFound, "job not recorded")

// ErrCorrupt marks a record that does not decode. Retrying cannot fix it.
var ErrCorrupt = errclass.New(errclass.Internal, "corrupt record")

// maxConflicts bounds the compare-and-set retries of one update: a key that many writers
// fight over this long is a bug, not contention.
const maxConflicts = 100

// Store reads and writes job and batch records in their key-value buckets.
type Store struct {
	Jobs    kv.KV
	Batches kv.KV
	// JS is the JetStream the buckets live on (kv.Buckets.JS): EachJob reads the jobs
	// bucket's stream through it. Nil for in-memory buckets, whose watch is exact.
	JS jetstream.JetStream
}

// New returns the store over the buckets bus.OpenBuckets opened.
func New(b kv.Buckets) Store { return Store{Jobs: b.Jobs, Batches: b.Batches, JS: b.JS} }

// Job loads a job record and its revision. A missing job is ErrNotRecorded.
func (s Store) Job(ctx context.Context, tenant, batch, ac string) (*Job, uint64, error) {
	return s.jobAt(ctx, JobKey(tenant, batch, ac))
}

func (s Store) jobAt(ctx context.Context, key string) (*Job, uint64, error) {
	e, err := s.Jobs.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("job %s: %w", key, ErrNotRecorded)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load job %s: %w", key, err)
	}
	j, err := DecodeJob(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("job %s: %w", key, err)
	}
	return j, e.Revision(), nil
}

// DecodeJob decodes a job record's stored bytes.
func DecodeJob(data []byte) (*Job, error) {
	var j Job
	if err := Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &j, nil
}

// CreateJob stores a new job record. It reports false, and changes nothing, when the job
// is recorded already (a redelivered submission).
func (s Store) CreateJob(ctx context.Context, j *Job) (bool, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return false, fmt.Errorf("encode job %s: %w", j.Key(), err)
	}
	if _, err := s.Jobs.Create(ctx, j.Key(), data); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
		return false, fmt.Errorf("record job %s: %w", j.Key(), err)
	}
	return true, nil
}

// PutJob stores j over the revision it was loaded at. A concurrent change makes it fail
// with an error kv.IsConflict recognises, so the caller reloads and decides again.
func (s Store) PutJob(ctx context.Context, j *Job, rev uint64) error {
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", j.Key(), err)
	}
	if _, err := s.Jobs.Update(ctx, j.Key(), data, rev); err != nil {
		return fmt.Errorf("update job %s: %w", j.Key(), err)
	}
	return nil
}

// EachJob calls fn with every job record of a batch, one at a time, in the bucket's
// order, without holding them all. On JetStream it reads the jobs bucket's stream with a
// pull consumer of its own (scanStream), which knows when it has seen every record; a
// watch's "initial values done" can come early after its ordered consumer is reset, and
// a batch's completion or its audit then read fewer jobs without a word. Each job comes
// once: a record rewritten while it is read (a review, a late cost) comes in the
// version read first (handed).
func (s Store) EachJob(ctx context.Context, tenant, batch string, fn func(*Job) error) error {
	prefix := BatchPrefix(tenant, batch)
	scan := func(ctx context.Context, emit func(key string, value []byte) bool) error {
		return s.scanWatch(ctx, prefix+"*", emit)
	}
	if s.JS != nil {
		named, ok := s.Jobs.(interface{ Bucket() string })
		if !ok {
			return fmt.Errorf("list jobs of %s: the jobs bucket (%T) names no stream to read", BatchKey(tenant, batch), s.Jobs)
		}
		scan = func(ctx context.Context, emit func(key string, value []byte) bool) error {
			return scanStream(ctx, s.JS, named.Bucket(), prefix+"*", emit)
		}
	}
	// Records are decoded on a goroutine of their own, ahead of fn: a batch's completion
	// reads every record back on one core at the end of the batch, and decoding is a third
	// of that work, which the other core can take.
	type decoded struct {
		j   *Job
		err error
		end bool // the scan is over; err says why, if it did not read every record
	}
	jobs := make(chan decoded, 256)
	stop := make(chan struct{})
	done := make(chan struct{})
	defer func() { close(stop); <-done }() // the scan's consumer is gone when EachJob returns
	go func() {
		defer close(done)
		send := func(d decoded) bool {
			select {
			case <-stop: // EachJob returned: not another record, even with room for it
				return false
			default:
			}
			select {
			case jobs <- d:
				return true
			case <-stop:
				return false
			}
		}
		var seen handed
		err := scan(ctx, func(key string, value []byte) bool {
			j, err := DecodeJob(value)
			if err != nil {
				send(decoded{err: fmt.Errorf("job %s: %w", key, err)})
				return false
			}
			if !seen.first(key, j.Index) {
				return true // a record rewritten while read, handed already
			}
			return send(decoded{j: j})
		})
		if err != nil {
			err = fmt.Errorf("list jobs of %s: %w", BatchKey(tenant, batch), err)
		}
		send(decoded{err: err, end: true})
	}()
	for d := range jobs {
		if d.err != nil || d.end {
			return d.err
		}
		if err := fn(d.j); err != nil {
			return err
		}
	}
	return nil // not reached: the scan ends with an end
}

// handed is which records a read handed on: a record rewritten while the read goes comes
// again (scanStream), and fn, a batch's completion among them, takes each job once.
// Records are known by a 31-bit hash of their key at the job's index, 4 bytes a job, so
// two records of one index under different keys (a corrupt record) are both handed on
// for the reader to see, unless their hashes collide (one in two billion).
type handed struct {
	at    []uint32
	other map[string]bool
}

// handedIndexes bounds the indexes handed keeps in its slice; a record beyond it is
// kept by key.
const handedIndexes = 1 << 24

// first says whether the record of key at index is new to the read, and marks it.
func (h *handed) first(key string, index int) bool {
	if index < 0 || index >= handedIndexes {
		if h.other == nil {
			h.other = map[string]bool{}
		}
		if h.other[key] {
			return false
		}
		h.other[key] = true
		return true
	}
	sum := crc32.ChecksumIEEE([]byte(key)) | 1 // 0 is "none yet"
	if index >= len(h.at) {
		h.at = slices.Grow(h.at, index+1-len(h.at))[:max(index+1, cap(h.at))]
	}
	switch h.at[index] {
	case 0:
		h.at[index] = sum
		return true
	case sum:
		return false
	}
	return h.first(key, -1) // another key at this index: kept by key
}

// scanWatch hands emit the current value of every key matching keys, through a watch:
// the in-memory buckets' way (memkv), whose watch delivers every key before its nil.
func (s Store) scanWatch(ctx context.Context, keys string, emit func(key string, value []byte) bool) error {
	w, err := s.Jobs.Watch(ctx, keys, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch ended early")
			}
			if e == nil || !emit(e.Key(), e.Value()) {
				return nil
			}
		}
	}
}

// JobIDs lists the jobs of a batch that are recorded, reading keys only.
func (s Store) JobIDs(ctx context.Context, tenant, batch string) (map[string]bool, error) {
	prefix := BatchPrefix(tenant, batch)
	l, err := s.Jobs.ListKeysFiltered(ctx, prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", BatchKey(tenant, batch), err)
	}
	defer func() { _ = l.Stop() }()
	out := map[string]bool{}
	for k := range l.Keys() {
		out[strings.TrimPrefix(k, prefix)] = true
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", BatchKey(tenant, batch), err)
	}
	return out, nil
}

// LoadJobs reads every job record of a batch.
func (s Store) LoadJobs(ctx context.Context, tenant, batch string) ([]*Job, error) {
	var out []*Job
	err := s.EachJob(ctx, tenant, batch, func(j *Job) error { out = append(out, j); return nil })
	return out, err
}

// Header reads a batch header, or nil when the batch is unknown.
func (s Store) Header(ctx context.Context, tenant, batch string) (*Batch, uint64, error) {
	e, err := s.Batches.Get(ctx, BatchKey(tenant, batch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load batch %s: %w", BatchKey(tenant, batch), err)
	}
	var h Batch
	if err := Unmarshal(e.Value(), &h); err != nil {
		return nil, 0, fmt.Errorf("batch %s: %w: %v", BatchKey(tenant, batch), ErrCorrupt, err)
	}
	return &h, e.Revision(), nil
}

// Headers calls fn with every batch header of tenant, in no particular order: the keys
// "<tenant>.<batch>" of the batches bucket (a header's completion tree and spot-check
// keys have a third token, and are left out).
func (s Store) Headers(ctx context.Context, tenant string, fn func(*Batch) error) error {
	w, err := s.Batches.Watch(ctx, BatchKey(tenant, "*"), jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("batch headers of %s: %w", tenant, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("batch headers of %s: %w", tenant, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("batch headers of %s: the watch ended early", tenant)
			}
			if e == nil {
				return nil // every current header was delivered
			}
			var h Batch
			if err := Unmarshal(e.Value(), &h); err != nil {
				return fmt.Errorf("batch %s: %w: %v", e.Key(), ErrCorrupt, err)
			}
			if err := fn(&h); err != nil {
				return err
			}
		}
	}
}

// EnsureHeader creates the batch header unless it exists.
func (s Store) EnsureHeader(ctx context.Context, h Batch) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := s.Batches.Create(ctx, BatchKey(h.Tenant, h.Batch), data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("create batch %s: %w", BatchKey(h.Tenant, h.Batch), err)
	}
	return nil
}

// UpdateHeader applies change to a batch header by compare-and-set, reloading on a
// conflict. change sees nil for an unknown batch and returns the header to store, or nil
// to leave it as it is. It returns the header as stored afterwards.
func (s Store) UpdateHeader(ctx context.Context, tenant, batch string, change func(*Batch) *Batch) (*Batch, error) {
	var out *Batch
	_, err := casBytes(ctx, s.Batches, BatchKey(tenant, batch), func(b []byte) ([]byte, bool, error) {
		var cur *Batch
		if len(b) > 0 {
			cur = &Batch{}
			if err := Unmarshal(b, cur); err != nil {
				return nil, false, fmt.Errorf("batch %s: %w: %v", BatchKey(tenant, batch), ErrCorrupt, err)
			}
		}
		next := change(cur)
		if next == nil {
			out = cur
			return b, false, nil
		}
		out = next
		data, err := json.Marshal(next)
		return data, true, err
	})
	return out, err
}

// PutHeader stores a batch header over revision rev (kv.CompareAndSet): an error that
// kv.IsConflict matches when another writer came first. A writer that folds something
// between reading the header and writing it (a completion revised by a review) uses it
// rather than UpdateHeader, whose change may not read anything else.
func (s Store) PutHeader(ctx context.Context, h *Batch, rev uint64) error {
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode batch %s: %w", BatchKey(h.Tenant, h.Batch), err)
	}
	if err := kv.CompareAndSet(ctx, s.Batches, BatchKey(h.Tenant, h.Batch), data, rev); err != nil {
		return fmt.Errorf("update batch %s: %w", BatchKey(h.Tenant, h.Batch), err)
	}
	return nil
}

// casBytes applies change to a raw value with compare-and-set, creating the key when
// absent. change returns the new value and whether anything changed.
func casBytes(ctx context.Context, bucket kv.KV, key string, change func([]byte) ([]byte, bool, error)) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		var cur []byte
		var rev uint64
		e, err := bucket.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("load %s: %w", key, err)
		default:
			cur, rev = append([]byte(nil), e.Value()...), e.Revision()
		}
		next, changed, err := change(cur)
		if err != nil {
			return nil, err
		}
		if !changed {
			return next, nil
		}
		err = kv.CompareAndSet(ctx, bucket, key, next, rev)
		if err == nil {
			return next, nil
		}
		if !kv.IsConflict(err) || attempt >= maxConflicts {
			return nil, fmt.Errorf("update %s: %w", key, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// backoff waits a little after the second conflict in a row, longer the more there were
// and at random, so writers that keep colliding on one key spread out instead of
// retrying in lockstep.
func backoff(ctx context.Context, attempt int) error {
	if attempt < 2 {
		return nil
	}
	return ctxtime.Sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 20))*int64(100*time.Microsecond))))
}

// A batch's completion state is a small tree of bitmaps, so that many aggregator handlers
// can mark jobs done at once without fighting over one key. Level 0 has one bit per job,
// spread over up to MaxShards shards; each level above has one bit per full node of the
// level below, fan-in 8, up to a single root. Every level is striped: node i's bit lives
// in parent i mod n at position i div n (n the parent level's width). The jobs in flight
// at one moment are neighbours in submission order, so they land in different shards;
// the shards fill up together near the end of the batch, neighbours again, so they land
// in different parents. A job whose update fills its node marks the parent, and so on:
// the update that fills the root completes the batch.
const (
	// ShardJobs is how many jobs a level-0 shard holds at least (small batches).
	ShardJobs = 64
	// MaxShards caps the level-0 shards, so progress reads a bounded number of keys.
	MaxShards = 128
	fanIn     = 8
)

// ShardCount is the number of level-0 completion shards of a batch of size n.
func ShardCount(n int) int { return min(MaxShards, max(1, (n+ShardJobs-1)/ShardJobs)) }

// widths are the node counts of a batch's levels, level 0 first, the root (1) last.
func widths(size int) []int {
	w := []int{ShardCount(size)}
	for w[len(w)-1] > 1 {
		w = append(w, (w[len(w)-1]+fanIn-1)/fanIn)
	}
	return w
}

// stripe is where item i of a level of count items lives among width nodes: the node and
// the bit, and how many items that node holds.
func stripe(i, count, width int) (node, bit, holds int) {
	return i % width, i / width, (count - i%width + width - 1) / width
}

// Popcount counts the set bits of a bitmap.
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

// MarkDone records that job index of a batch is final and reports whether the whole
// batch is now final. Every step is an idempotent bit-set, and a full node always marks
// its parent (again), so a redelivered event, or one retried after a crash between two
// levels, repairs what is missing and reaches the same answer.
func (s Store) MarkDone(ctx context.Context, tenant, batch string, index, size int) (bool, error) {
	if index < 0 || index >= size {
		return false, fmt.Errorf("job %d of %s: outside the batch of %d", index, BatchKey(tenant, batch), size)
	}
	ws := widths(size)
	item, count := index, size
	for level, width := range ws {
		node, bit, holds := stripe(item, count, width)
		bitmap, err := casBytes(ctx, s.Batches, ShardKey(tenant, batch, level, node), func(b []byte) ([]byte, bool, error) {
			next, changed := setBit(b, bit)
			return next, changed, nil
		})
		if err != nil {
			return false, err
		}
		if Popcount(bitmap) < holds {
			return false, nil
		}
		item, count = node, width
	}
	return true, nil
}

// Progress counts the final jobs of a batch from its level-0 shards.
func (s Store) Progress(ctx context.Context, tenant, batch string, size int) (int, error) {
	done := 0
	for sh := 0; sh < ShardCount(size); sh++ {
		e, err := s.Batches.Get(ctx, ShardKey(tenant, batch, 0, sh))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("load shard %d of %s: %w", sh, BatchKey(tenant, batch), err)
		}
		done += Popcount(e.Value())
	}
	return done, nil
}

// StartRedrive records a redrive of jobs as attempt on the batch header, so the aggregator
// knows when the redrive is complete. It fails when the batch is not complete or another
// redrive is still running.
func (s Store) StartRedrive(ctx context.Context, tenant, batch string, attempt int, jobs []string) error {
	var refuse error
	_, err := s.UpdateHeader(ctx, tenant, batch, func(h *Batch) *Batch {
		switch {
		case h == nil:
			refuse = fmt.Errorf("batch %s: not found", BatchKey(tenant, batch))
			return nil
		case h.Completion == nil:
			refuse = fmt.Errorf("batch %s is still running", BatchKey(tenant, batch))
			return nil
		case h.Redrive != nil && len(h.Redrive.Pending) > 0 && h.Completion.Attempt < h.Redrive.Attempt:
			refuse = fmt.Errorf("batch %s: redrive %d is still running", BatchKey(tenant, batch), h.Redrive.Attempt)
			return nil
		}
		next := *h
		next.Redrive = &Redrive{Attempt: attempt, Pending: jobs}
		return &next
	})
	if err != nil {
		return err
	}
	return refuse
}

// Spotcheck returns the job that holds an interactive batch's spot-check, "" for none.
func (s Store) Spotcheck(ctx context.Context, tenant, batch string) (string, error) {
	e, err := s.Batches.Get(ctx, SpotcheckKey(tenant, batch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load spot-check of %s: %w", BatchKey(tenant, batch), err)
	}
	return string(e.Value()), nil
}

// ClaimSpotcheck makes job the one whose sign-off waits for a person in an interactive
// batch, unless another job holds it already. It returns the holder.
func (s Store) ClaimSpotcheck(ctx context.Context, tenant, batch, job string) (string, error) {
	_, err := s.Batches.Create(ctx, SpotcheckKey(tenant, batch), []byte(job))
	if err == nil {
		return job, nil
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return s.Spotcheck(ctx, tenant, batch)
	}
	return "", fmt.Errorf("claim spot-check of %s: %w", BatchKey(tenant, batch), err)
}

// FindJob returns one job record of a batch, or an error naming the batch and the job
// when it has none.
func FindJob(ctx context.Context, b kv.Buckets, tenant, batchID, job string) (*Job, error) {
	r, _, err := New(b).Job(ctx, tenant, batchID, job)
	if errors.Is(err, ErrNotRecorded) {
		return nil, fmt.Errorf("batch %s has no job %s", batchID, job)
	}
	return r, err
}
