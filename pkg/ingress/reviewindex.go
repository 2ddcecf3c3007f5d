package ingress

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// maxIndexedQueues and maxIndexedItems bound the review queues the ingress keeps an index
// of (about 300 bytes an item); the least recently read is dropped first. A queue of more
// items than maxIndexedItems alone is not kept: it is drawn on every request, as a
// running batch's is.
const (
	maxIndexedQueues = 64
	maxIndexedItems  = 200_000
)

// queueIndex is a batch's review queue without its job records: what the queue holds
// (each item's id, AC, case, kind, reasons) in queue order, so a page reads the records
// of its own items alone. The queue is drawn over every job of the batch (a seeded
// sample, the flagged and unsure ACs), so building the index reads every record once.
type queueIndex struct {
	// stamp is what the index was built for (queueStamp); "" for an index of a batch
	// still running, which is used for one request only.
	stamp string
	// entries are the queue's entries, their records left out (ReviewEntry.WithJob(nil)).
	entries []client.ReviewEntry
	// pos is each item's position, byAC each AC's items' positions.
	pos  map[string]int
	byAC map[string][]int
}

func newQueueIndex(stamp string, q []client.ReviewEntry) *queueIndex {
	x := &queueIndex{stamp: stamp, entries: make([]client.ReviewEntry, len(q)), pos: make(map[string]int, len(q)), byAC: map[string][]int{}}
	for i, e := range q {
		x.entries[i] = e.WithJob(nil)
		x.pos[e.Item] = i
		x.byAC[e.AC] = append(x.byAC[e.AC], i)
	}
	return x
}

// queueStamp says which judged state of a batch its queue was drawn from: once the batch
// is complete, its judges' verdicts stand (a rejudge changes no decision, and a person's
// review leaves the judge's verdict in the record beside theirs), so its queue stands
// until a redrive completes it again (the completion's attempt) or another completion
// replaces it (what it announced). A batch still running, or being redriven (its blocked
// jobs judged again may join the queue), has no stamp: its queue is drawn again on every
// request.
func queueStamp(h *records.Batch) (string, bool) {
	if h == nil || h.Completion == nil || h.Redrive != nil && len(h.Redrive.Pending) > 0 {
		return "", false
	}
	c := h.Completion
	digest := c.Digest
	if c.Announced != nil {
		// A completion revised by people's reviews keeps what the batch announced.
		digest = c.Announced.Digest
	}
	return fmt.Sprintf("%d/%s", c.Attempt, digest), true
}

// queueIndexes are the indexes the ingress keeps, by tenant and batch.
type queueIndexes struct {
	mu    sync.Mutex
	m     map[string]*queueIndex
	order []string // least recently read first
	items int      // held by m
}

func (c *queueIndexes) get(key, stamp string) *queueIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.m[key]
	if x == nil || x.stamp != stamp {
		return nil
	}
	c.touch(key)
	return x
}

func (c *queueIndexes) put(key string, x *queueIndex) {
	if len(x.entries) > maxIndexedItems {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*queueIndex{}
	}
	if old := c.m[key]; old != nil {
		c.items -= len(old.entries)
	}
	c.m[key] = x
	c.items += len(x.entries)
	c.touch(key)
	for len(c.order) > maxIndexedQueues || c.items > maxIndexedItems {
		c.items -= len(c.m[c.order[0]].entries)
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *queueIndexes) touch(key string) {
	if i := slices.Index(c.order, key); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	c.order = append(c.order, key)
}

// queueIndexOf is the index of a batch's review queue: kept from an earlier request for
// the same judged state (queueStamp, read from the batch's header), or drawn from every
// job record of the batch.
func (s *server) queueIndexOf(ctx context.Context, tenant, batch string) (*queueIndex, error) {
	key := records.BatchKey(tenant, batch)
	h, _, err := records.New(s.cfg.Buckets).Header(ctx, tenant, batch)
	if err != nil {
		return nil, err
	}
	stamp, stands := queueStamp(h)
	if stands {
		if x := s.indexes.get(key, stamp); x != nil {
			return x, nil
		}
	}
	q, _, err := client.ReviewQueue(ctx, s.cfg.Buckets, tenant, batch)
	if err != nil {
		return nil, err
	}
	x := newQueueIndex(stamp, q)
	if stands {
		s.indexes.put(key, x)
	}
	return x, nil
}

// entries are the index's entries at positions, each over its job's record as read now
// (one read per AC, whatever its cases).
func (s *server) entries(ctx context.Context, tenant, batch string, x *queueIndex, positions []int) ([]client.ReviewEntry, error) {
	st := records.New(s.cfg.Buckets)
	jobs := map[string]*records.Job{}
	out := make([]client.ReviewEntry, len(positions))
	for i, at := range positions {
		e := x.entries[at]
		j := jobs[e.AC]
		if j == nil {
			var err error
			if j, _, err = st.Job(ctx, tenant, batch, e.AC); errors.Is(err, records.ErrNotRecorded) {
				// Named by its item: the record's key is the AC's.
				return nil, fmt.Errorf("%s: its job's record: %w", e.Item, records.ErrNotRecorded)
			} else if err != nil {
				return nil, fmt.Errorf("review item %s of %s/%s: %w", e.Item, tenant, batch, err)
			}
			jobs[e.AC] = j
		}
		out[i] = e.WithJob(j)
	}
	return out, nil
}
