package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Quota bounds what one team holds on a shared deployment, so that one team filling the
// blob store or the queues never turns into another team's failure. A zero field takes
// DefaultQuota's; a negative one sets no bound.
type Quota struct {
	// Stored bounds the bytes the tenant's objects take in the blob store: its
	// artifacts and plans and what the services store for it (renders, transcripts,
	// call records, manifests).
	Stored int64
	// Batches bounds its batches in flight: opened and neither complete nor cancelled.
	Batches int
	// ACs bounds the jobs of its batches in flight.
	ACs int
}

// DefaultQuota is every team's quota where the operator set none: room for one batch of
// the largest size (events.MaxBatchSize) and a few dozen ordinary ones at once, and 20 GiB
// of artifacts. `tribunal serve ingress` has the same defaults as flags.
var DefaultQuota = Quota{Stored: 20 << 30, Batches: 32, ACs: 1_000_000}

// Quotas are each team's quota: Default, or the team's own in Tenants.
type Quotas struct {
	Default Quota
	Tenants map[string]Quota
}

// For is tenant's quota, its zero fields filled from DefaultQuota.
func (q Quotas) For(tenant string) Quota {
	out, ok := q.Tenants[tenant]
	if !ok {
		out = q.Default
	}
	if out.Stored == 0 {
		out.Stored = DefaultQuota.Stored
	}
	if out.Batches == 0 {
		out.Batches = DefaultQuota.Batches
	}
	if out.ACs == 0 {
		out.ACs = DefaultQuota.ACs
	}
	return out
}

// Refusal reasons of a quota (tribunal_refusals_total{service="ingress"}).
const (
	RefusedQuotaStored  = "quota_stored"
	RefusedQuotaBatches = "quota_batches"
	RefusedQuotaACs     = "quota_acs"
	// RefusedStoreFull is the blob store itself out of space: no team's quota, the
	// operator's to fix.
	RefusedStoreFull = "store_full"
)

// How long a measured figure is trusted before it is measured again; what the ingress
// accepts meanwhile is added to it. A team near its quota is measured anew before it is
// refused, so a figure made stale by a prune or a completed batch never refuses it.
const (
	storedTTL = 30 * time.Second
	flightTTL = 5 * time.Second
)

// usage is what the ingress knows of each team's holdings.
type usage struct {
	store   blob.Store
	headers func(ctx context.Context, tenant string, fn func(*records.Batch) error) error
	log     *slog.Logger

	mu     sync.Mutex
	stored map[string]measured
	flight map[string]inFlight
	// opened are the batches this ingress published events of, with the largest size
	// they claimed: a batch.opened's, or a job.submitted's batch size. A batch whose
	// header the aggregator has not recorded yet is in flight all the same, and one whose
	// jobs claim more than its header's size counts at what they claim.
	opened map[string]map[string]opened
	warned bool
}

type opened struct {
	size int
	at   time.Time
}

// openedTTL is how long a batch this ingress opened counts as in flight without a
// header: the aggregator records one within moments, unless it is down.
const openedTTL = 10 * time.Minute

type measured struct {
	bytes int64
	at    time.Time
}

type inFlight struct {
	batches, acs int
	// open are the batches counted, each with the size it is counted at, so a batch
	// opened again (a resumed submission) is not counted twice, and one whose jobs claim
	// more is counted for the difference.
	open map[string]int
	at   time.Time
}

func newUsage(store blob.Store, b *records.Store, log *slog.Logger) *usage {
	u := &usage{store: store, log: log, stored: map[string]measured{}, flight: map[string]inFlight{}, opened: map[string]map[string]opened{}}
	if b != nil {
		u.headers = b.Headers
	}
	return u
}

// quotaError is a request refused for a quota, with its reason word.
type quotaError struct {
	reason, msg string
}

func (e *quotaError) Error() string { return e.msg }

// storedBytes is what tenant stores; fresh forces a measurement. ok is false when the
// store cannot count (the quota then cannot hold, which is said once in the log).
func (u *usage) storedBytes(ctx context.Context, tenant string, fresh bool) (int64, bool, error) {
	u.mu.Lock()
	m, known := u.stored[tenant]
	u.mu.Unlock()
	if known && !fresh && time.Since(m.at) < storedTTL {
		return m.bytes, true, nil
	}
	n, err := blob.Usage(ctx, u.store, tenant)
	if errors.Is(err, blob.ErrUsageUnknown) {
		u.mu.Lock()
		if !u.warned {
			u.warned = true
			u.log.Warn("the blob store cannot count a team's bytes: the stored-bytes quota is not enforced")
		}
		u.mu.Unlock()
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("usage of %s: %w", tenant, err)
	}
	u.mu.Lock()
	u.stored[tenant] = measured{bytes: n, at: time.Now()}
	u.mu.Unlock()
	return n, true, nil
}

// checkPut refuses a blob of size bytes that would take tenant past its quota. A blob
// the tenant stores already costs nothing.
func (u *usage) checkPut(ctx context.Context, tenant string, q Quota, size int64, exists func() bool) error {
	if q.Stored < 0 {
		return nil
	}
	n, ok, err := u.storedBytes(ctx, tenant, false)
	if err != nil || !ok || n+size <= q.Stored {
		return err
	}
	// Near the quota: measure anew (a prune may have freed room) and look for the blob.
	if n, _, err = u.storedBytes(ctx, tenant, true); err != nil || n+size <= q.Stored || exists() {
		return err
	}
	return &quotaError{RefusedQuotaStored, fmt.Sprintf("tenant %s stores %s of its quota of %s (--tenant-max-stored); this blob of %s would pass it: prune old batches (tribunal prune) or ask the operator for more",
		tenant, diskspace.Bytes(n), diskspace.Bytes(q.Stored), diskspace.Bytes(size))}
}

// stored adds a blob just stored to tenant's figure.
func (u *usage) addStored(tenant string, size int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if m, ok := u.stored[tenant]; ok {
		m.bytes += size
		u.stored[tenant] = m
	}
}

// inFlight is tenant's batches in flight; fresh forces a count.
func (u *usage) inFlight(ctx context.Context, tenant string, fresh bool) (inFlight, error) {
	u.mu.Lock()
	f, known := u.flight[tenant]
	u.mu.Unlock()
	if known && !fresh && time.Since(f.at) < flightTTL {
		return f, nil
	}
	f = inFlight{open: map[string]int{}, at: time.Now()}
	ended := map[string]bool{}
	if u.headers != nil {
		err := u.headers(ctx, tenant, func(h *records.Batch) error {
			if h.Completion == nil && h.Cancel == nil {
				f.open[h.Batch] = h.Size
			} else {
				ended[h.Batch] = true
			}
			return nil
		})
		if err != nil {
			return f, err
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for batch, o := range u.opened[tenant] {
		size, recorded := f.open[batch]
		switch {
		case ended[batch], !recorded && time.Since(o.at) > openedTTL:
			delete(u.opened[tenant], batch)
		case o.size > size:
			// Unrecorded yet, or its jobs claim more than its header says.
			f.open[batch] = o.size
		}
	}
	for _, size := range f.open {
		f.batches++
		f.acs += size
	}
	u.flight[tenant] = f
	return f, nil
}

// opening is what one request claims of one batch: the size its batch.opened declares,
// or the largest batch size its job.submitted carry (a window of a batch).
type opening struct {
	batch string
	size  int
}

// openings are what a request's events claim of their batches, one per batch, at the
// largest size claimed. Every window of a batch is claimed against the quota, not only
// its batch.opened: a batch sent without one, or whose jobs say it is larger than it was
// opened with, is held to the quota too, at the window that passes it.
func openings(evs []events.Event) []opening {
	var out []opening
	at := map[string]int{}
	for _, ev := range evs {
		var size int
		switch p := ev.Payload.(type) {
		case *events.BatchOpened:
			size = p.Size
		case *events.JobSubmitted:
			size = max(p.BatchSize, p.Index+1)
		default:
			continue
		}
		if i, ok := at[ev.BatchID]; ok {
			out[i].size = max(out[i].size, size)
			continue
		}
		at[ev.BatchID] = len(out)
		out = append(out, opening{batch: ev.BatchID, size: size})
	}
	return out
}

// checkOpen refuses what a request claims that would take tenant past its quota of
// batches or ACs in flight: a batch not in flight is a new one, a batch in flight
// (opened again by a resumed submission, or its next window) adds what it claims over
// the size it is counted at.
func (u *usage) checkOpen(ctx context.Context, tenant string, q Quota, opens []opening) error {
	if len(opens) == 0 || q.Batches < 0 && q.ACs < 0 {
		return nil
	}
	for _, fresh := range []bool{false, true} {
		f, err := u.inFlight(ctx, tenant, fresh)
		if err != nil {
			return err
		}
		batches, acs := f.batches, f.acs
		for _, o := range opens {
			size, ok := f.open[o.batch]
			if !ok {
				batches++
			}
			acs += max(o.size-size, 0)
		}
		switch {
		case q.Batches >= 0 && batches > q.Batches:
			if !fresh {
				continue // counted anew before refusing: a batch may have completed since
			}
			return &quotaError{RefusedQuotaBatches, fmt.Sprintf("tenant %s has %d batches in flight, its quota is %d (--tenant-max-batches): wait for one to complete, or cancel one (tribunal cancel)",
				tenant, f.batches, q.Batches)}
		case q.ACs >= 0 && acs > q.ACs:
			if !fresh {
				continue
			}
			return &quotaError{RefusedQuotaACs, fmt.Sprintf("tenant %s has %d ACs in flight and this request opens %d more, its quota is %d (--tenant-max-acs): wait for a batch to complete, or split the work",
				tenant, f.acs, acs-f.acs, q.ACs)}
		}
		return nil
	}
	return nil
}

// addOpen counts what a request just published claims as in flight.
func (u *usage) addOpen(tenant string, opens []opening) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, counted := u.flight[tenant]
	for _, o := range opens {
		if u.opened[tenant] == nil {
			u.opened[tenant] = map[string]opened{}
		}
		if prev, ok := u.opened[tenant][o.batch]; !ok || o.size >= prev.size {
			u.opened[tenant][o.batch] = opened{size: o.size, at: time.Now()}
		}
		if !counted {
			continue
		}
		size, ok := f.open[o.batch]
		if !ok {
			f.batches++
		}
		if o.size > size {
			f.open[o.batch] = o.size
			f.acs += o.size - size
		}
	}
	if counted {
		u.flight[tenant] = f
	}
}
