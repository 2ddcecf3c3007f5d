package console

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// batchRows is one batch's index entries, in batch order, and what pages derive from
// all of them (computed once per load).
type batchRows struct {
	Entries []index.Entry
	// FromIndex says the entries came from the stored index; otherwise they were read
	// from every job record (a running batch, or one completed before indexes existed).
	FromIndex bool

	once   sync.Once
	charts []chart
	facets facets

	searchOnce sync.Once
	search     []string
}

// haystack is every entry's searchText, computed on the first search.
func (b *batchRows) haystack() []string {
	b.searchOnce.Do(func() {
		b.search = make([]string, len(b.Entries))
		for i := range b.Entries {
			b.search[i] = searchText(&b.Entries[i])
		}
	})
	return b.search
}

// derived computes the charts and the filter choices once.
func (b *batchRows) derived() ([]chart, facets) {
	b.once.Do(func() {
		b.charts = buildCharts(b.Entries)
		b.facets = buildFacets(b.Entries)
	})
	return b.charts, b.facets
}

// rowsCache keeps recently read batches' entries: a completed batch never changes (a
// redrive completes it again, under another key), so its index is read once, not on
// every page of its table; a running batch's entries are kept for runningTTL.
type rowsCache struct {
	mu    sync.Mutex
	items map[string]*rowsItem
	total int
	limit int
	group singleflight.Group
}

type rowsItem struct {
	rows    *batchRows
	used    time.Time
	expires time.Time
}

// maxCachedEntries bounds the entries kept across batches: about 800 bytes each in
// memory, so a 100,000-AC batch and a few small ones fit the console's 256 MiB limit in
// deploy/k8s beside the transient memory of decoding the next index.
const maxCachedEntries = 120_000

// runningTTL is how long a running batch's entries are reused.
const runningTTL = 2 * time.Second

func newRowsCache() *rowsCache {
	return &rowsCache{items: map[string]*rowsItem{}, limit: maxCachedEntries}
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
		c.total -= len(it.rows.Entries)
		delete(c.items, key)
		return nil
	}
	it.used = time.Now()
	return it.rows
}

func (c *rowsCache) put(key string, rows *batchRows, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[key]; ok {
		c.total -= len(old.rows.Entries)
	}
	it := &rowsItem{rows: rows, used: time.Now()}
	if ttl > 0 {
		it.expires = it.used.Add(ttl)
	}
	c.items[key] = it
	c.total += len(rows.Entries)
	// Least recently used first, but never the one just read.
	for c.total > c.limit && len(c.items) > 1 {
		oldest := ""
		for k, v := range c.items {
			if k != key && (oldest == "" || v.used.Before(c.items[oldest].used)) {
				oldest = k
			}
		}
		c.total -= len(c.items[oldest].rows.Entries)
		delete(c.items, oldest)
	}
}

// rows returns a batch's entries: from its stored index when it has one, else from its
// job records.
func (s *server) rows(ctx context.Context, tenant, batch string, h *records.Batch) (*batchRows, error) {
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
			entries, derr := index.Decode(data)
			if derr == nil {
				return &batchRows{Entries: entries, FromIndex: true}, nil
			}
			err = derr
		}
		// The records still hold everything the index was built from.
		s.log.Warn("batch index unreadable, reading the job records", "tenant", tenant, "batch", batch, "err", err)
	}
	var entries []index.Entry
	err := records.New(s.cfg.Buckets).EachJob(ctx, tenant, batch, func(j *records.Job) error {
		entries = append(entries, index.Of(j))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rows of %s: %w", records.BatchKey(tenant, batch), err)
	}
	sortEntries(entries)
	return &batchRows{Entries: entries}, nil
}
