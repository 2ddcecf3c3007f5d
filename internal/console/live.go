package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// A running batch's pages are served from a follower: one per batch, shared by every
// viewer, that reads the batch's job records once and then only what changes. It reads
// the jobs bucket's stream with an ordered consumer filtered to the batch's keys, the last
// record of each key first and every later write as it is made, and applies each to its
// copy of the batch's entries and to the summary counts (charts, filter choices, kinds,
// judges, the rows awaiting a person), so a refresh of a page reads no record at all:
// reloading a running 1,000,000-AC batch's records every two seconds, per viewer, was a
// million records read and decoded each time.
//
// The entries are kept in chunks of index.ChunkSize by their position in the batch
// (Entry.Index), so a write changes one chunk. A page is served from a snapshot, the
// chunks as they were when it was taken: a chunk a snapshot holds is never changed, a
// write to it copies it first. A batch bigger than its share of the cache's limit (a
// maxFollowers-th) keeps only the chunks written to last decoded and the others encoded
// as a one-chunk index (tens of bytes an entry rather than 800), and its filtered and
// sorted views read them a chunk at a time, as those of a completed batch too big for the
// cache do.
//
// A follower that cannot follow (its consumer lost for good, a record that does not
// decode, a job record deleted, which a position alone cannot take back) stops, says why
// in the log, and the batch's pages read every job record again (loadRows) until a new
// follower has caught up: never a page silently behind the records.

// Followers' bounds.
const (
	// maxFollowers bounds the running batches followed at once; the least recently viewed
	// one stops for another. Each keeps at most a maxFollowers-th of the cache's limit of
	// entries decoded, so that all of them together hold what the cache may; what they
	// hold counts against the cache's limit (rowsCache.followed), completed batches
	// evicted for them.
	maxFollowers = 4
	// followIdle is how long a follower nobody views keeps following.
	followIdle = time.Minute
	// followRetry is how long a batch whose follower failed is read whole before another
	// follower is tried.
	followRetry = 10 * time.Second
	// maxPosition bounds an entry's position in its batch: the chunks are a slice by
	// position, and a record claiming a position past every batch's is refused.
	maxPosition = 1 << 24
	// followResets is how many times in a row the ordered consumer may fail to be
	// recreated (JetStream backs off 1 s, 2 s, 4 s) before the follower gives up.
	followResets = 3
)

// hotChunks is how many chunks a follower of a batch bigger than its share of the cache's
// limit keeps decoded, twice as many between two rounds of encoding: the last ones written to, where a
// running batch's next writes land (tests lower it).
var hotChunks = 16

// errNotFollowed says the running batch is read whole, its follower having failed a
// moment ago or the buckets having no stream to follow (in-memory ones).
var errNotFollowed = errors.New("not followed")

// followers are the console's followers of running batches, by "<tenant>/<batch>".
type followers struct {
	js     jetstream.JetStream
	bucket string // the jobs bucket; "" when there is no stream to follow
	log    *slog.Logger
	limit  int
	// read counts the job records the console decoded (server.recordsRead).
	read *atomic.Int64

	mu     sync.Mutex
	by     map[string]*follower
	failed map[string]time.Time // until when a batch is read whole
}

func newFollowers(jobs any, js jetstream.JetStream, log *slog.Logger, limit int, read *atomic.Int64) *followers {
	fs := &followers{js: js, log: log, limit: limit, read: read, by: map[string]*follower{}, failed: map[string]time.Time{}}
	if named, ok := jobs.(interface{ Bucket() string }); ok && js != nil {
		fs.bucket = named.Bucket()
	}
	return fs
}

// rows returns a snapshot of the running batch's entries from its follower, started
// (and caught up with the records) if there is none.
func (fs *followers) rows(ctx context.Context, tenant, batch string) (*batchRows, error) {
	f, err := fs.follow(tenant, batch)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.ready:
	case <-f.dead:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return f.snapshot()
}

func (fs *followers) follow(tenant, batch string) (*follower, error) {
	key := tenant + "/" + batch
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.bucket == "" {
		return nil, errNotFollowed
	}
	if f := fs.by[key]; f != nil {
		f.used.Store(time.Now().UnixNano())
		return f, nil
	}
	if until, ok := fs.failed[key]; ok {
		if time.Now().Before(until) {
			return nil, errNotFollowed
		}
		delete(fs.failed, key)
	}
	if len(fs.by) >= maxFollowers {
		var oldest *follower
		for _, f := range fs.by {
			if oldest == nil || f.used.Load() < oldest.used.Load() {
				oldest = f
			}
		}
		fs.dropLocked(oldest)
		oldest.stop()
	}
	f := newFollower(fs, tenant, batch)
	fs.by[key] = f
	go f.run()
	return f, nil
}

// drop forgets f (stopped, failed or idle); failed keeps its batch read whole a while.
func (fs *followers) drop(f *follower, failed bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.dropLocked(f)
	if failed {
		now := time.Now()
		for k, until := range fs.failed {
			if now.After(until) {
				delete(fs.failed, k)
			}
		}
		fs.failed[f.key] = now.Add(followRetry)
	}
}

func (fs *followers) dropLocked(f *follower) {
	if fs.by[f.key] == f {
		delete(fs.by, f.key)
	}
}

// stop ends the follower of a batch, if any: it completed, and its pages come from its
// index now.
func (fs *followers) stop(tenant, batch string) {
	fs.mu.Lock()
	f := fs.by[tenant+"/"+batch]
	if f != nil {
		fs.dropLocked(f)
	}
	fs.mu.Unlock()
	if f != nil {
		f.stop()
	}
}

// weight is what the followers hold, in the rows cache's unit (batchRows.weight): an
// entry decoded, or 800 bytes of encoded chunks.
func (fs *followers) weight() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	w := 0
	for _, f := range fs.by {
		w += f.weight()
	}
	return w
}

// count is how many batches are followed.
func (fs *followers) count() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.by)
}

// follower keeps one running batch's entries up to date with its job records.
type follower struct {
	fs            *followers
	key           string
	tenant, batch string
	used          atomic.Int64 // when a viewer last asked, in Unix nanoseconds

	ready chan struct{} // closed once every record written before the start is applied
	dead  chan struct{} // closed when the follower ended; err says why
	quit  chan struct{} // closed to stop it
	once  sync.Once

	mu sync.Mutex
	// chunks are the entries by position: chunk k holds positions k*ChunkSize on. A nil
	// chunk holds nothing.
	chunks []*liveChunk
	n      int
	fold   liveFold
	// writes counts the writes applied (a chunk's touched is the count at its last one);
	// seq is the stream sequence of the last.
	writes uint64
	seq    uint64
	// decoded counts the chunks held decoded.
	decoded int
	// snap is the snapshot pages read, nil once a write changed something since.
	snap *batchRows
	err  error
}

// liveChunk is up to index.ChunkSize entries of a running batch, in batch order: decoded
// (entries) or encoded as a one-chunk index (stored). A chunk a snapshot holds (shared)
// is not changed again: a write replaces it by a changed copy.
type liveChunk struct {
	entries []index.Entry
	stored  []byte
	n       int
	// shared and touched are the follower's, read and written under its lock only.
	shared  bool
	touched uint64
}

func newFollower(fs *followers, tenant, batch string) *follower {
	f := &follower{fs: fs, key: tenant + "/" + batch, tenant: tenant, batch: batch,
		ready: make(chan struct{}), dead: make(chan struct{}), quit: make(chan struct{})}
	f.used.Store(time.Now().UnixNano())
	return f
}

func (f *follower) stop() { f.once.Do(func() { close(f.quit) }) }

// run follows the batch's records until it is stopped, idle or fails.
func (f *follower) run() {
	err := f.follow()
	stopped := false
	select {
	case <-f.quit:
		stopped = true
	default:
	}
	if err == nil || stopped {
		err = errors.New("stopped")
	} else {
		f.fs.log.Warn("following a running batch failed: its pages read every job record until it is followed again",
			"tenant", f.tenant, "batch", f.batch, "err", err)
	}
	f.mu.Lock()
	f.err, f.snap = err, nil
	f.mu.Unlock()
	f.fs.drop(f, !stopped)
	close(f.dead)
}

// follow reads the batch's records, then its writes, applying each.
func (f *follower) follow() error {
	fs := f.fs
	prefix := records.BatchPrefix(f.tenant, f.batch)
	subjects := "$KV." + fs.bucket + "."
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := fs.js.OrderedConsumer(ctx, "KV_"+fs.bucket, jetstream.OrderedConsumerConfig{
		FilterSubjects:   []string{subjects + prefix + "*"},
		DeliverPolicy:    jetstream.DeliverLastPerSubjectPolicy,
		MaxResetAttempts: followResets,
	})
	if err != nil {
		return fmt.Errorf("follow the records of %s: %w", records.BatchKey(f.tenant, f.batch), err)
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("follow the records of %s: %w", records.BatchKey(f.tenant, f.batch), err)
	}
	defer func() {
		it.Stop()
		// Gone now, rather than when the server gives up on it.
		if info := c.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = fs.js.DeleteConsumer(dctx, "KV_"+fs.bucket, info.Name)
			cancel()
		}
	}()
	if info := c.CachedInfo(); info != nil && info.NumPending == 0 {
		close(f.ready) // a batch without a record yet
	}
	// Stopped or idle: the iterator's Next returns.
	idle := time.NewTicker(followIdle / 4)
	defer idle.Stop()
	go func() {
		for {
			select {
			case <-f.quit:
				it.Stop()
				return
			case <-ctx.Done():
				return
			case <-idle.C:
				if time.Since(time.Unix(0, f.used.Load())) > followIdle {
					f.stop()
				}
			}
		}
	}()
	for {
		m, err := it.Next()
		if err != nil {
			select {
			case <-f.quit:
				return nil
			default:
			}
			return fmt.Errorf("follow the records of %s: %w", records.BatchKey(f.tenant, f.batch), err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("follow the records of %s: %w", records.BatchKey(f.tenant, f.batch), err)
		}
		key := strings.TrimPrefix(m.Subject(), subjects)
		if op := m.Headers().Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return fmt.Errorf("job record %s was deleted (%s): a follower cannot take a record back", key, op)
		}
		j, err := records.DecodeJob(m.Data())
		if err != nil {
			return fmt.Errorf("job %s: %w", key, err)
		}
		fs.read.Add(1)
		e := index.Of(j)
		if e.Index < 0 || e.Index >= maxPosition {
			return fmt.Errorf("job %s: position %d out of range", key, e.Index)
		}
		if err := f.apply(e, md.Sequence.Stream); err != nil {
			return fmt.Errorf("job %s: %w", key, err)
		}
		if md.NumPending == 0 {
			select {
			case <-f.ready:
			default:
				close(f.ready)
			}
		}
	}
}

// apply puts e in place of the entry of its AC, or adds it.
func (f *follower) apply(e index.Entry, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := e.Index / index.ChunkSize
	for len(f.chunks) <= k {
		f.chunks = append(f.chunks, nil)
	}
	c, err := f.writable(k)
	if err != nil {
		return err
	}
	defer f.spill()
	f.writes++
	c.touched, f.seq, f.snap = f.writes, seq, nil
	at := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Index >= e.Index })
	for i := at; i < len(c.entries) && c.entries[i].Index == e.Index; i++ {
		if c.entries[i].ACID == e.ACID {
			f.fold.remove(&c.entries[i])
			f.fold.add(&e)
			c.entries[i] = e
			return nil
		}
	}
	// A new record: after those at its position already (a full read's order).
	for at < len(c.entries) && c.entries[at].Index == e.Index {
		at++
	}
	c.entries = append(c.entries, index.Entry{})
	copy(c.entries[at+1:], c.entries[at:])
	c.entries[at] = e
	c.n++
	f.n++
	f.fold.add(&e)
	return nil
}

// writable returns chunk k decoded and not shared with a snapshot, replacing it if need be.
func (f *follower) writable(k int) (*liveChunk, error) {
	c := f.chunks[k]
	switch {
	case c == nil:
		c = &liveChunk{}
		f.decoded++
	case c.stored != nil:
		es, err := decodeChunk(c.stored)
		if err != nil {
			return nil, err
		}
		c = &liveChunk{entries: es, n: len(es)}
		f.decoded++
	case c.shared:
		c = &liveChunk{entries: append(make([]index.Entry, 0, len(c.entries)+1), c.entries...), n: c.n}
	default:
		return c, nil
	}
	f.chunks[k] = c
	return c, nil
}

// spill encodes the decoded chunks written to least recently, but hotChunks, once the
// batch is bigger than its share of the cache's limit.
func (f *follower) spill() {
	if f.n <= f.fs.limit/maxFollowers || f.decoded <= 2*hotChunks {
		return // spilled in rounds, not on every write
	}
	var decoded []int
	for k, c := range f.chunks {
		if c != nil && c.stored == nil {
			decoded = append(decoded, k)
		}
	}
	sort.Slice(decoded, func(a, b int) bool { return f.chunks[decoded[a]].touched > f.chunks[decoded[b]].touched })
	for _, k := range decoded[hotChunks:] {
		c := f.chunks[k]
		data, err := encodeChunk(c.entries)
		if err != nil {
			// Kept decoded: memory, not correctness, is what spilling saves.
			f.fs.log.Warn("a running batch's chunk could not be encoded", "tenant", f.tenant, "batch", f.batch, "err", err)
			continue
		}
		f.chunks[k] = &liveChunk{stored: data, n: c.n, touched: c.touched}
		f.decoded--
	}
}

// snapshot returns the rows as they are now, for every page until the next write.
func (f *follower) snapshot() (*batchRows, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, fmt.Errorf("following %s: %w", records.BatchKey(f.tenant, f.batch), f.err)
	}
	if f.snap != nil {
		return f.snap, nil
	}
	chunks := make([]*liveChunk, 0, len(f.chunks))
	size := 0
	for _, c := range f.chunks {
		if c != nil && c.n > 0 {
			c.shared = true
			chunks = append(chunks, c)
			size += len(c.stored)
		}
	}
	// Spilled, its filtered and sorted views read it a chunk at a time (tooBig), as
	// those of a completed batch too big for the cache do, rather than decode it whole.
	b := &batchRows{n: f.n, size: size, spilled: size > 0, src: func() (chunkReader, error) { return &liveReader{chunks: chunks}, nil }}
	sum := f.fold.summary()
	b.once.Do(func() { b.sum = sum })
	f.snap = b
	return b, nil
}

func (f *follower) weight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, stored := 0, 0
	for _, c := range f.chunks {
		if c != nil {
			if c.stored == nil {
				w += c.n
			}
			stored += len(c.stored)
		}
	}
	return w + stored/800
}

// applied is the stream sequence of the last write applied (tests wait on it).
func (f *follower) applied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

func encodeChunk(entries []index.Entry) ([]byte, error) {
	b := index.NewBuilder()
	defer b.Close()
	for i := range entries {
		b.Add(entries[i])
	}
	return b.Bytes()
}

func decodeChunk(data []byte) ([]index.Entry, error) {
	r, err := index.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	return r.Page(0, r.Len())
}

// liveReader reads a snapshot's chunks (chunkReader); it reports the encoded chunks it
// decodes.
type liveReader struct {
	chunks  []*liveChunk
	bytes   int64
	entries int
}

func (r *liveReader) entriesOf(c *liveChunk) ([]index.Entry, error) {
	if c.stored == nil {
		// The snapshot's own: capped, so that nothing appends over the next entries.
		return c.entries[:len(c.entries):len(c.entries)], nil
	}
	es, err := decodeChunk(c.stored)
	r.bytes += int64(len(c.stored))
	r.entries += len(es)
	return es, err
}

func (r *liveReader) Page(from, to int) ([]index.Entry, error) {
	var out []index.Entry
	at := 0
	for _, c := range r.chunks {
		if at >= to {
			break
		}
		if at+c.n <= from {
			at += c.n
			continue
		}
		es, err := r.entriesOf(c)
		if err != nil {
			return nil, err
		}
		lo, hi := max(from-at, 0), min(to-at, len(es))
		if out == nil && hi-lo == to-from {
			return es[lo:hi:hi], nil // the page is within one chunk
		}
		out = append(out, es[lo:hi]...)
		at += c.n
	}
	return out, nil
}

func (r *liveReader) Each(fn func(*index.Entry) error) error {
	for _, c := range r.chunks {
		es, err := r.entriesOf(c)
		if err != nil {
			return err
		}
		for i := range es {
			if err := fn(&es[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *liveReader) Read() (int64, int) { return r.bytes, r.entries }

// liveFold is a running batch's summary (batchSummary), kept a write at a time: each
// changed entry's old counts taken back and its new ones added.
type liveFold struct {
	charts   chartsFold
	facets   facetsFold
	judges   map[string]int
	kinds    map[events.Kind]int
	awaiting map[string]index.Entry // by AC
}

func (l *liveFold) add(e *index.Entry)    { l.fold(e, 1) }
func (l *liveFold) remove(e *index.Entry) { l.fold(e, -1) }

func (l *liveFold) fold(e *index.Entry, d int) {
	if l.judges == nil {
		l.judges, l.kinds, l.awaiting = map[string]int{}, map[events.Kind]int{}, map[string]index.Entry{}
	}
	l.charts.fold(e, d)
	l.facets.fold(e, d)
	for j := range judgesOf(e) {
		bump(l.judges, j, d)
	}
	bump(l.kinds, events.Kind(e.Kind), d)
	if e.Status == string(events.StatusAwaitingSpotcheck) {
		if d > 0 {
			l.awaiting[e.ACID] = *e
		} else {
			delete(l.awaiting, e.ACID)
		}
	}
}

// summary is the batch page's summary of the entries folded, as batchRows.summary
// computes it from them.
func (l *liveFold) summary() batchSummary {
	s := batchSummary{charts: l.charts.charts(), facets: l.facets.facets(), kinds: map[events.Kind]int{}}
	for k, n := range l.kinds {
		s.kinds[k] = n
	}
	for j := range l.judges {
		s.judges = append(s.judges, j)
	}
	sort.Strings(s.judges)
	for _, e := range l.awaiting {
		s.awaiting = append(s.awaiting, e)
	}
	sort.Slice(s.awaiting, func(i, j int) bool {
		if s.awaiting[i].Index != s.awaiting[j].Index {
			return s.awaiting[i].Index < s.awaiting[j].Index
		}
		return s.awaiting[i].ACID < s.awaiting[j].ACID
	})
	return s
}
