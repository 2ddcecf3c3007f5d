package console

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// batchRows is one batch's index entries, in batch order, and what pages derive from
// all of them (computed once per load).
//
// A batch whose stored index is chunked (index.Reader) keeps the index as stored, about
// 15 bytes an entry rather than 800 decoded: a page of its table in batch order decodes
// the chunks it shows, and the charts, filter choices and awaiting rows are counted a
// chunk at a time. A view of the table that needs every entry at once (a filter, a
// search, another order) decodes them all, once (all), unless the batch is too big for
// the cache (tooBig); the CSV export and a comparison walk the chunks (cursor) and never
// decode the batch whole. A running batch's rows are a snapshot of its follower's
// chunks (live.go), read the same way.
type batchRows struct {
	// FromIndex says the entries came from the stored index; otherwise they were read
	// from every job record (a running batch, or one completed before indexes existed).
	FromIndex bool

	// src opens a reader of the entries a chunk at a time: the chunked index, or a
	// running batch's chunks (nil: entries holds everything); n is their count and size
	// the stored bytes they take.
	src  func() (chunkReader, error)
	n    int
	size int
	// spilled says the rows are a running batch's kept mostly encoded (live.go): too big
	// to decode whole, whatever the cache's limit.
	spilled bool

	allOnce sync.Once
	entries []index.Entry
	allErr  error
	// decoded says entries holds every entry (set by all, read by the cache's weight).
	decoded atomic.Bool

	once   sync.Once
	sum    batchSummary
	sumErr error

	searchOnce sync.Once
	search     []string
}

// batchSummary is what the batch page shows of every entry.
type batchSummary struct {
	charts   []chart
	facets   facets
	judges   []string
	kinds    map[events.Kind]int
	awaiting []index.Entry
}

// chunkReader reads entries in batch order, a chunk at a time: index.Reader over a
// stored index, liveReader over a running batch's chunks.
type chunkReader interface {
	// Page returns the entries at positions from to to.
	Page(from, to int) ([]index.Entry, error)
	// Each calls fn with every entry.
	Each(fn func(*index.Entry) error) error
	// Read is what the reader read of stored bytes and the entries it decoded.
	Read() (bytes int64, entries int)
}

// storedRows are the rows of a chunked index as stored.
func storedRows(data []byte, n int) *batchRows {
	return &batchRows{n: n, size: len(data), FromIndex: true, src: func() (chunkReader, error) {
		return index.NewReader(bytes.NewReader(data), int64(len(data)))
	}}
}

// indexRead, when set (tests), is told what each read of a chunked index read: its bytes
// and the entries decoded.
var indexRead func(bytes int64, entries int)

func entriesRows(entries []index.Entry, fromIndex bool) *batchRows {
	b := &batchRows{entries: entries, n: len(entries), FromIndex: fromIndex}
	b.decoded.Store(true)
	return b
}

// len is how many entries the batch has.
func (b *batchRows) len() int { return b.n }

// all returns every entry, in batch order, decoding a chunked index the first time.
func (b *batchRows) all() ([]index.Entry, error) {
	if b.src == nil {
		return b.entries, nil
	}
	b.allOnce.Do(func() {
		r, err := b.reader()
		if err != nil {
			b.allErr = err
			return
		}
		entries := make([]index.Entry, 0, b.n)
		b.allErr = r.Each(func(e *index.Entry) error {
			entries = append(entries, *e)
			return nil
		})
		b.report(r)
		b.entries = entries
		b.decoded.Store(true)
	})
	return b.entries, b.allErr
}

func (b *batchRows) reader() (chunkReader, error) { return b.src() }

func (b *batchRows) report(r chunkReader) {
	if indexRead != nil {
		indexRead(r.Read())
	}
}

// page returns the entries at positions from to to in batch order: from a chunked
// index, only the chunks they are in.
func (b *batchRows) page(from, to int) ([]index.Entry, error) {
	from, to = min(max(from, 0), b.n), min(to, b.n)
	if b.src == nil || b.decoded.Load() {
		entries, err := b.all()
		return entries[from:to], err
	}
	r, err := b.reader()
	if err != nil {
		return nil, err
	}
	es, err := r.Page(from, to)
	b.report(r)
	return es, err
}

// each calls fn with every entry in batch order: a chunked index a chunk at a time.
func (b *batchRows) each(fn func(*index.Entry)) error {
	if b.src == nil || b.decoded.Load() {
		entries, err := b.all()
		for i := range entries {
			fn(&entries[i])
		}
		return err
	}
	r, err := b.reader()
	if err != nil {
		return err
	}
	err = r.Each(func(e *index.Entry) error {
		fn(e)
		return nil
	})
	b.report(r)
	return err
}

// chunkCursor hands over a batch's entries a chunk at a time, in batch order (cursor).
type chunkCursor struct {
	b    *batchRows
	r    chunkReader
	from int
	// read is what r had read when the last chunk was reported.
	bytes   int64
	entries int
}

// cursor starts a walk over the entries a chunk at a time: a chunked index not decoded
// yet is read chunk by chunk (each read reported to indexRead), so a walk holds one
// chunk's entries, not the batch's; decoded entries are handed over in slices of as many.
func (b *batchRows) cursor() (*chunkCursor, error) {
	c := &chunkCursor{b: b}
	if b.src != nil && !b.decoded.Load() {
		r, err := b.reader()
		if err != nil {
			return nil, err
		}
		c.r = r
	}
	return c, nil
}

// next returns the next chunk's entries, none at the end. They are valid until the next
// call (decoded entries are the cache's: not to be changed).
func (c *chunkCursor) next() ([]index.Entry, error) {
	from, to := c.from, min(c.from+index.ChunkSize, c.b.n)
	if from >= to {
		return nil, nil
	}
	c.from = to
	if c.r == nil {
		entries, err := c.b.all()
		if err != nil {
			return nil, err
		}
		return entries[from:to], nil
	}
	es, err := c.r.Page(from, to)
	if indexRead != nil {
		b, e := c.r.Read()
		indexRead(b-c.bytes, e-c.entries)
		c.bytes, c.entries = b, e
	}
	return es, err
}

// chunks calls fn with every entry a chunk at a time, in batch order (cursor).
func (b *batchRows) chunks(fn func([]index.Entry) error) error {
	c, err := b.cursor()
	if err != nil {
		return err
	}
	for {
		es, err := c.next()
		if err != nil || len(es) == 0 {
			return err
		}
		if err := fn(es); err != nil {
			return err
		}
	}
}

// haystack is every entry's searchText, computed on the first search.
func (b *batchRows) haystack() ([]string, error) {
	entries, err := b.all()
	if err != nil {
		return nil, err
	}
	b.searchOnce.Do(func() {
		b.search = make([]string, len(entries))
		for i := range entries {
			b.search[i] = searchText(&entries[i])
		}
	})
	return b.search, nil
}

// summary computes the charts, the filter choices, the judges, the kinds and the rows
// awaiting a person once, in one pass over the entries.
func (b *batchRows) summary() (batchSummary, error) {
	b.once.Do(func() {
		var charts chartsFold
		var fs facetsFold
		judges := map[string]bool{}
		kinds := map[events.Kind]int{}
		var awaiting []index.Entry
		b.sumErr = b.each(func(e *index.Entry) {
			charts.add(e)
			fs.add(e)
			for j := range judgesOf(e) {
				judges[j] = true
			}
			kinds[events.Kind(e.Kind)]++
			if e.Status == string(events.StatusAwaitingSpotcheck) {
				awaiting = append(awaiting, *e)
			}
		})
		b.sum = batchSummary{charts: charts.charts(), facets: fs.facets(), kinds: kinds, awaiting: awaiting}
		for j := range judges {
			b.sum.judges = append(b.sum.judges, j)
		}
		sort.Strings(b.sum.judges)
	})
	return b.sum, b.sumErr
}

// tooBig reports whether the rows are a chunked index whose entries, decoded, would
// weigh more than limit: its filtered and sorted views are then read a chunk at a time
// on each request (tableQuery.applyEach) instead of decoded once and kept.
func (b *batchRows) tooBig(limit int) bool {
	return b.src != nil && !b.decoded.Load() && (b.n > limit || b.spilled)
}

// weight is what the rows hold in the cache's unit, an entry decoded (about 800 bytes).
func (b *batchRows) weight() int {
	w := b.size/800 + 1
	if b.decoded.Load() {
		w += b.n
	}
	return w
}

// rowsCache keeps recently read batches' entries: a completed batch never changes (a
// redrive completes it again, under another key), so its index is read once, not on
// every page of its table; a running batch's entries are kept for runningTTL.
type rowsCache struct {
	mu    sync.Mutex
	items map[string]*rowsItem
	limit int
	group singleflight.Group
	// followed, when set, is what the running batches' followers hold in the cache's
	// unit (followers.weight): they share the limit, and batches are evicted for them.
	followed func() int
}

type rowsItem struct {
	rows    *batchRows
	used    time.Time
	expires time.Time
}

// maxCachedEntries bounds the entries kept across batches: about 800 bytes each in
// memory, so a 100,000-AC batch and a few small ones fit the console's 256 MiB limit in
// deploy/k8s beside the transient memory of decoding the next index. A batch with a
// chunked index weighs its stored bytes until a view decodes all its entries.
const maxCachedEntries = 120_000

// runningTTL is how long a running batch's entries read whole are reused: the batch's
// follower failed a moment ago (live.go), or there is no stream to follow.
const runningTTL = 2 * time.Second

// rowsLimit is the cache's limit (maxCachedEntries; tests lower it).
var rowsLimit = maxCachedEntries

func newRowsCache() *rowsCache {
	return &rowsCache{items: map[string]*rowsItem{}, limit: rowsLimit}
}

// rowsKey names what a batch's entries were read from: a completion (its attempt and
// time), or the running batch.
func rowsKey(tenant, batch string, h *records.Batch) string {
	if c := h.Completion; c != nil {
		return tenant + "/" + batch + "/" + strconv.Itoa(c.Attempt) + "/" + c.At.UTC().Format(time.RFC3339Nano)
	}
	return tenant + "/" + batch + "/running"
}

func (c *rowsCache) get(key string) *batchRows {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.items[key]
	if !ok {
		return nil
	}
	if !it.expires.IsZero() && time.Now().After(it.expires) {
		delete(c.items, key)
		return nil
	}
	it.used = time.Now()
	c.evict(key)
	return it.rows
}

func (c *rowsCache) put(key string, rows *batchRows, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := &rowsItem{rows: rows, used: time.Now()}
	if ttl > 0 {
		it.expires = it.used.Add(ttl)
	}
	c.items[key] = it
	c.evict(key)
}

// evict drops the least recently used batches, never key, until the rest fit the limit.
// The weights are summed each time: a batch's grows when a view decodes its entries.
func (c *rowsCache) evict(key string) {
	total := 0
	if c.followed != nil {
		total = c.followed()
	}
	for _, it := range c.items {
		total += it.rows.weight()
	}
	for total > c.limit && len(c.items) > 1 {
		oldest := ""
		for k, v := range c.items {
			if k != key && (oldest == "" || v.used.Before(c.items[oldest].used)) {
				oldest = k
			}
		}
		total -= c.items[oldest].rows.weight()
		delete(c.items, oldest)
	}
}

// rows returns a batch's entries: from its stored index when it has one, a running
// batch's from its follower, else from its job records.
func (s *server) rows(ctx context.Context, tenant, batch string, h *records.Batch) (*batchRows, error) {
	if h.Completion == nil {
		r, err := s.live.rows(ctx, tenant, batch)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// The follower said why in the log when it failed: read every record.
	} else {
		s.live.stop(tenant, batch)
	}
	key := rowsKey(tenant, batch, h)
	if r := s.cache.get(key); r != nil {
		return r, nil
	}
	v, err, _ := s.cache.group.Do(key, func() (any, error) {
		if r := s.cache.get(key); r != nil {
			return r, nil
		}
		r, err := s.loadRows(ctx, tenant, batch, h)
		if err != nil {
			return nil, err
		}
		ttl := time.Duration(0)
		if h.Completion == nil {
			ttl = runningTTL
		}
		s.cache.put(key, r, ttl)
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*batchRows), nil
}

func (s *server) loadRows(ctx context.Context, tenant, batch string, h *records.Batch) (*batchRows, error) {
	if c := h.Completion; c != nil && c.Index != nil {
		data, _, err := blob.ReadAll(ctx, s.cfg.Store, blob.Ref{Tenant: tenant, SHA256: c.Index.SHA256})
		if err == nil {
			if r, rerr := index.NewReader(bytes.NewReader(data), int64(len(data))); rerr == nil {
				return storedRows(data, r.Len()), nil
			}
			// An index stored before chunks: decoded whole.
			entries, derr := index.Decode(data)
			if derr == nil {
				return entriesRows(entries, true), nil
			}
			err = derr
		}
		// The records still hold everything the index was built from.
		s.log.Warn("batch index unreadable, reading the job records", "tenant", tenant, "batch", batch, "err", err)
	}
	var entries []index.Entry
	err := records.New(s.cfg.Buckets).EachJob(ctx, tenant, batch, func(j *records.Job) error {
		s.recordsRead.Add(1)
		entries = append(entries, index.Of(j))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rows of %s: %w", records.BatchKey(tenant, batch), err)
	}
	sortEntries(entries)
	return entriesRows(entries, false), nil
}
