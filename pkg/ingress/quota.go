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
	// ledger holds the batches each team's requests opened, where every replica of the
	// ingress reserves them (QuotaBucket).
	ledger ledger
	now    func() time.Time

	mu     sync.Mutex
	stored map[string]measured
	flight map[string]recorded
	warned bool
}

// openedTTL is how long a batch a request opened counts as in flight without a header:
// the aggregator records one within moments, unless it is down.
const openedTTL = 10 * time.Minute

type measured struct {
	bytes int64
	at    time.Time
}

// recorded is what a team's batch headers say is in flight, as counted at at: the
// batches neither complete nor cancelled, with their sizes, and those that ended.
type recorded struct {
	open  map[string]int
	ended map[string]bool
	at    time.Time
}

func newUsage(store blob.Store, b *records.Store, replicas int, log *slog.Logger) *usage {
	u := &usage{store: store, log: log, ledger: &localLedger{}, now: time.Now, stored: map[string]measured{}, flight: map[string]recorded{}}
	if b != nil {
		u.headers = b.Headers
		if b.JS != nil {
			u.ledger = newKVLedger(b.JS, replicas)
		}
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

// recordedFlight is what tenant's batch headers say is in flight; fresh forces a count.
func (u *usage) recordedFlight(ctx context.Context, tenant string, fresh bool) (recorded, error) {
	u.mu.Lock()
	f, known := u.flight[tenant]
	u.mu.Unlock()
	if known && !fresh && u.now().Sub(f.at) < flightTTL {
		return f, nil
	}
	f = recorded{open: map[string]int{}, ended: map[string]bool{}, at: u.now()}
	if u.headers != nil {
		err := u.headers(ctx, tenant, func(h *records.Batch) error {
			if h.Completion == nil && h.Cancel == nil {
				f.open[h.Batch] = h.Size
			} else {
				f.ended[h.Batch] = true
			}
			return nil
		})
		if err != nil {
			return f, err
		}
	}
	u.mu.Lock()
	u.flight[tenant] = f
	u.mu.Unlock()
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

// reserve reserves what a request claims (opens) of tenant's quota of batches and ACs in
// flight, or refuses it: a batch not in flight is a new one, a batch in flight (opened
// again by a resumed submission, or its next window) adds what it claims over the size
// it is counted at. In flight is what the batch headers record together with what the
// ledger holds of requests whose batches no header records yet (or claim more than
// their header), and the reservation is made in the same compare-and-set that counted
// it, so two requests at once, on this ingress or another, cannot both pass on the same
// room. The returned release gives back what this reservation added, for a request that
// then publishes nothing.
func (u *usage) reserve(ctx context.Context, tenant string, q Quota, opens []opening) (release func(context.Context), err error) {
	release = func(context.Context) {}
	if len(opens) == 0 || q.Batches < 0 && q.ACs < 0 {
		return release, nil
	}
	for _, fresh := range []bool{false, true} {
		rec, err := u.recordedFlight(ctx, tenant, fresh)
		if err != nil {
			return release, err
		}
		now := u.now()
		var refusal *quotaError
		// raised are the reservations this request made, each with what it replaced
		// (a zero reservation: none).
		var raised map[string][2]reservation
		err = u.ledger.modify(ctx, tenant, func(r *reservations) (bool, error) {
			refusal, raised = nil, map[string][2]reservation{}
			changed := r.prune(rec, now)
			sizes := map[string]int{}
			for b, size := range rec.open {
				sizes[b] = size
			}
			for b, res := range r.Batches {
				sizes[b] = max(sizes[b], res.Size)
			}
			had, held := len(sizes), 0
			for _, size := range sizes {
				held += size
			}
			batches, acs := had, held
			for _, o := range opens {
				size, ok := sizes[o.batch]
				if !ok {
					batches++
				}
				acs += max(o.size-size, 0)
			}
			switch {
			case q.Batches >= 0 && batches > q.Batches:
				refusal = &quotaError{RefusedQuotaBatches, fmt.Sprintf("tenant %s has %d batches in flight, its quota is %d (--tenant-max-batches): wait for one to complete, or cancel one (tribunal cancel)",
					tenant, had, q.Batches)}
				return changed, nil
			case q.ACs >= 0 && acs > q.ACs:
				refusal = &quotaError{RefusedQuotaACs, fmt.Sprintf("tenant %s has %d ACs in flight and this request opens %d more, its quota is %d (--tenant-max-acs): wait for a batch to complete, or split the work",
					tenant, held, acs-held, q.ACs)}
				return changed, nil
			}
			for _, o := range opens {
				if prev := r.Batches[o.batch]; o.size > prev.Size {
					next := reservation{Size: o.size, At: now}
					raised[o.batch] = [2]reservation{prev, next}
					r.Batches[o.batch] = next
					changed = true
				}
			}
			return changed, nil
		})
		if err != nil {
			return release, err
		}
		if refusal != nil {
			if !fresh {
				continue // counted anew before refusing: a batch may have completed since
			}
			return release, refusal
		}
		return func(ctx context.Context) { u.release(ctx, tenant, raised) }, nil
	}
	return release, nil
}

// release gives back the reservations a request made (raised: each batch's before and
// after), unless another request has raised them since.
func (u *usage) release(ctx context.Context, tenant string, raised map[string][2]reservation) {
	if len(raised) == 0 {
		return
	}
	err := u.ledger.modify(ctx, tenant, func(r *reservations) (bool, error) {
		changed := false
		for b, pair := range raised {
			if cur, ok := r.Batches[b]; !ok || !cur.At.Equal(pair[1].At) || cur.Size != pair[1].Size {
				continue
			}
			changed = true
			if pair[0].Size == 0 {
				delete(r.Batches, b)
			} else {
				r.Batches[b] = pair[0]
			}
		}
		return changed, nil
	})
	if err != nil {
		// What stays reserved is let go when its batch ends or openedTTL after it.
		u.log.Warn("a refused request's quota reservation could not be given back", "tenant", tenant, "err", err)
	}
}

// prune lets go of the reservations whose batch ended, and of those no header records
// openedTTL after they were made; it reports whether it dropped any.
func (r *reservations) prune(rec recorded, now time.Time) bool {
	changed := false
	for b, res := range r.Batches {
		_, open := rec.open[b]
		if rec.ended[b] || !open && now.Sub(res.At) > openedTTL {
			delete(r.Batches, b)
			changed = true
		}
	}
	return changed
}
