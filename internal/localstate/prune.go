package localstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// BatchInfo is one batch of a state folder as prune sees it, and what prune decides.
type BatchInfo struct {
	Tenant    string    `json:"tenant"`
	Batch     string    `json:"batch"`
	CreatedAt time.Time `json:"created_at"`
	Jobs      int       `json:"jobs"`
	Complete  bool      `json:"complete"`
	// Views are the rubric views its jobs loop on.
	Views []string `json:"views,omitempty"`
	// Prune says the batch goes; Why says why it goes or stays.
	Prune bool   `json:"prune"`
	Why   string `json:"why"`
}

// PruneOptions say which batches go. With neither Keep nor Before, none does.
type PruneOptions struct {
	// Keep keeps the newest Keep batches (0: no such rule).
	Keep int
	// Before lets only batches created before it go (zero: no age rule).
	Before time.Time
	// DropCache also empties the judge-call cache (and the equivalence teacher
	// transcripts kept there): the next run pays for every call again.
	DropCache bool
	// DryRun decides and reports without changing anything.
	DryRun bool
	// Stream is the event stream's name ("TRIBUNAL" when empty).
	Stream string
}

// PruneReport is what prune found and did.
type PruneReport struct {
	Batches []BatchInfo `json:"batches"`
	Pruned  int         `json:"pruned"`
	// Records is how many job and batch records were deleted.
	Records int `json:"records"`
	// Events is how many events the stream dropped.
	Events uint64 `json:"events"`
	// CacheEntries is how many judge-call cache entries were dropped.
	CacheEntries uint64 `json:"cache_entries"`
	// Blobs and BlobBytes are the blobs no record or event refers to any more, removed.
	Blobs     int   `json:"blobs"`
	BlobBytes int64 `json:"blob_bytes"`
	DryRun    bool  `json:"dry_run,omitempty"`
}

// Plan decides which batches go, newest first: a batch stays while it is not complete
// (a later run's services may still finish it), while it is one of the newest Keep, or
// while it is newer than Before; and a batch holding a rubric view that a staying batch
// also holds stays too, because the audit of that batch replays the view's loop from its
// first run. With neither rule set, every batch stays.
func Plan(batches []BatchInfo, o PruneOptions) {
	sort.SliceStable(batches, func(i, j int) bool {
		if !batches[i].CreatedAt.Equal(batches[j].CreatedAt) {
			return batches[i].CreatedAt.After(batches[j].CreatedAt)
		}
		return batches[i].Batch > batches[j].Batch
	})
	for i := range batches {
		b := &batches[i]
		switch {
		case o.Keep == 0 && o.Before.IsZero():
			b.Prune, b.Why = false, "kept: nothing selected (give --keep or --older-than)"
		case !b.Complete:
			b.Prune, b.Why = false, "kept: not complete"
		case i < o.Keep:
			b.Prune, b.Why = false, fmt.Sprintf("kept: one of the newest %d", o.Keep)
		case !o.Before.IsZero() && !b.CreatedAt.Before(o.Before):
			b.Prune, b.Why = false, "kept: newer than "+o.Before.UTC().Format(time.RFC3339)
		default:
			b.Prune, b.Why = true, "pruned"
		}
	}
	// A view's loop spans batches: keep its whole history while any of it stays.
	for changed := true; changed; {
		changed = false
		staying := map[string]string{}
		for _, b := range batches {
			if !b.Prune {
				for _, v := range b.Views {
					staying[b.Tenant+"/"+v] = b.Batch
				}
			}
		}
		for i := range batches {
			b := &batches[i]
			if !b.Prune {
				continue
			}
			for _, v := range b.Views {
				if by, ok := staying[b.Tenant+"/"+v]; ok {
					b.Prune, b.Why, changed = false, "kept: its rubric view "+v+" continues in batch "+by, true
					break
				}
			}
		}
	}
}

// Prune removes the batches Plan selects from a state folder opened without services
// (the caller holds its lock): their job and batch records, the events before the first
// event of the oldest batch that stays (events of pruned batches after that point stay,
// harmless), and then every blob of store that no remaining record, cache entry, view or
// event refers to. Rubric view records stay: the next run continues their loops. A nil
// store (blobs kept elsewhere) prunes no blob.
func Prune(ctx context.Context, js jetstream.JetStream, b bus.Buckets, store *fileblob.Store, o PruneOptions) (*PruneReport, error) {
	if o.Stream == "" {
		o.Stream = "TRIBUNAL"
	}
	batches, err := listBatches(ctx, b)
	if err != nil {
		return nil, err
	}
	Plan(batches, o)
	rep := &PruneReport{Batches: batches, DryRun: o.DryRun}
	for _, bi := range batches {
		if bi.Prune {
			rep.Pruned++
		}
	}
	if o.DryRun {
		return rep, nil
	}
	stream, err := js.Stream(ctx, o.Stream)
	if err != nil {
		return nil, fmt.Errorf("prune: stream %s: %w", o.Stream, err)
	}
	if rep.Pruned > 0 {
		if rep.Events, err = purgeEvents(ctx, stream, batches); err != nil {
			return nil, err
		}
		for _, bi := range batches {
			if !bi.Prune {
				continue
			}
			n, err := deleteRecords(ctx, b, bi.Tenant, bi.Batch)
			rep.Records += n
			if err != nil {
				return rep, err
			}
		}
		for _, kv := range []kv.KV{b.Jobs, b.Batches} {
			kv, ok := kv.(jetstream.KeyValue)
			if !ok {
				continue
			}
			if err := kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(-1)); err != nil {
				return rep, fmt.Errorf("prune: compact %s: %w", kv.Bucket(), err)
			}
		}
	}
	if o.DropCache {
		cs, err := js.Stream(ctx, "KV_"+bus.BucketCache)
		if err != nil {
			return rep, fmt.Errorf("prune: cache: %w", err)
		}
		info, err := cs.Info(ctx)
		if err != nil {
			return rep, fmt.Errorf("prune: cache: %w", err)
		}
		rep.CacheEntries = info.State.Msgs
		if err := cs.Purge(ctx); err != nil {
			return rep, fmt.Errorf("prune: drop the cache: %w", err)
		}
	}
	if store != nil {
		if err := pruneBlobs(ctx, b, stream, store, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// listBatches reads every batch header and the views of its jobs.
func listBatches(ctx context.Context, b bus.Buckets) ([]BatchInfo, error) {
	w, err := b.Batches.Watch(ctx, "*.*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("prune: list batches: %w", err)
	}
	var out []BatchInfo
	for e := range w.Updates() {
		if e == nil {
			break
		}
		var h records.Batch
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			_ = w.Stop()
			return nil, fmt.Errorf("prune: batch %s: %w", e.Key(), err)
		}
		tenant, batch, _ := strings.Cut(e.Key(), ".")
		out = append(out, BatchInfo{Tenant: tenant, Batch: batch, CreatedAt: h.CreatedAt, Jobs: h.Size, Complete: h.Completion != nil})
	}
	_ = w.Stop()
	st := records.New(b)
	for i := range out {
		bi := &out[i]
		seen := map[string]bool{}
		err := st.EachJob(ctx, bi.Tenant, bi.Batch, func(j *records.Job) error {
			if l, ok := registry.Looping(j.Spec.Kind); ok {
				if v := l.StateKey(bi.Tenant, j.Spec); v != "" && !seen[v] {
					seen[v] = true
					bi.Views = append(bi.Views, v)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
		sort.Strings(bi.Views)
	}
	return out, nil
}

// skew is how far before a batch's recorded creation its first event may have been
// stored. The creation time is the submitting client's clock, which in a state folder is
// this machine's, as is the server's: a second covers the clock's own steps.
const skew = time.Second

// purgeEvents drops the events stored before the oldest staying batch began, all of them
// when none stays, and returns how many went.
func purgeEvents(ctx context.Context, stream jetstream.Stream, batches []BatchInfo) (uint64, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune: stream: %w", err)
	}
	cut := info.State.LastSeq + 1
	var oldest time.Time
	for _, b := range batches {
		if !b.Prune && (oldest.IsZero() || b.CreatedAt.Before(oldest)) {
			oldest = b.CreatedAt
		}
	}
	if !oldest.IsZero() {
		if cut, err = firstSeqAt(ctx, stream, oldest.Add(-skew), cut); err != nil {
			return 0, err
		}
	}
	if cut <= info.State.FirstSeq {
		return 0, nil
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(cut)); err != nil {
		return 0, fmt.Errorf("prune: purge events before %d: %w", cut, err)
	}
	after, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune: stream: %w", err)
	}
	return info.State.Msgs - after.State.Msgs, nil
}

// firstSeqAt is the sequence of the first event stored at or after t, none when no event
// is that recent.
func firstSeqAt(ctx context.Context, stream jetstream.Stream, t time.Time, none uint64) (uint64, error) {
	c, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t})
	if err != nil {
		return 0, fmt.Errorf("prune: read the stream from %s: %w", t, err)
	}
	msgs, err := c.FetchNoWait(1)
	if err != nil {
		return 0, fmt.Errorf("prune: read the stream from %s: %w", t, err)
	}
	for m := range msgs.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return 0, fmt.Errorf("prune: event metadata: %w", err)
		}
		return md.Sequence.Stream, nil
	}
	if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, fmt.Errorf("prune: read the stream from %s: %w", t, err)
	}
	return none, nil
}

// deleteRecords purges a batch's job records, its header, completion shards and HE-2
// marker.
func deleteRecords(ctx context.Context, b bus.Buckets, tenant, batch string) (int, error) {
	n := 0
	for _, s := range []struct {
		kv     kv.KV
		filter []string
	}{
		{b.Jobs, []string{records.BatchPrefix(tenant, batch) + "*"}},
		{b.Batches, []string{records.BatchKey(tenant, batch), records.BatchPrefix(tenant, batch) + "*"}},
	} {
		keys, err := s.kv.ListKeysFiltered(ctx, s.filter...)
		if err != nil {
			return n, fmt.Errorf("prune: list records of %s: %w", records.BatchKey(tenant, batch), err)
		}
		var list []string
		for k := range keys.Keys() {
			list = append(list, k)
		}
		_ = keys.Stop()
		for _, k := range list {
			if err := purge(ctx, s.kv, k); err != nil {
				return n, fmt.Errorf("prune: delete %s: %w", k, err)
			}
			n++
		}
	}
	return n, nil
}

// purge removes key and its history: a JetStream bucket purges it, any other KV deletes
// it.
func purge(ctx context.Context, kv kv.KV, key string) error {
	if p, ok := kv.(interface {
		Purge(context.Context, string, ...jetstream.KVDeleteOpt) error
	}); ok {
		return p.Purge(ctx, key)
	}
	return kv.Delete(ctx, key)
}

// hexDigest finds blob digests in records, events and JSON blobs, whatever their shape.
var hexDigest = regexp.MustCompile(`[0-9a-f]{64}`)

// maxScannedBlob bounds the JSON blobs read for the digests they name (manifests, call
// records).
const maxScannedBlob = 64 << 20

// pruneBlobs removes the blobs nothing refers to any more. A digest counts as a
// reference wherever it appears (any record of any bucket, any event left in the stream,
// any JSON blob referred to), so a blob is kept whenever in doubt.
func pruneBlobs(ctx context.Context, b bus.Buckets, stream jetstream.Stream, store *fileblob.Store, rep *PruneReport) error {
	refs := map[string]bool{}
	note := func(data []byte) {
		for _, d := range hexDigest.FindAll(data, -1) {
			refs[string(d)] = true
		}
	}
	for i, kv := range []kv.KV{b.Jobs, b.Batches, b.Cache, b.Views} {
		w, err := kv.Watch(ctx, ">", jetstream.IgnoreDeletes())
		if err != nil {
			return fmt.Errorf("prune: read bucket %d: %w", i, err)
		}
		for e := range w.Updates() {
			if e == nil {
				break
			}
			note(e.Value())
		}
		_ = w.Stop()
	}
	if err := scanStream(ctx, stream, note); err != nil {
		return err
	}
	// Blobs that name blobs (a manifest, a judge call's record naming its images).
	type object struct {
		ref  blob.Ref
		size int64
	}
	var all []object
	if err := store.Walk(ctx, func(ref blob.Ref, size int64) error { all = append(all, object{ref, size}); return nil }); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	for grew := true; grew; {
		grew = false
		for _, o := range all {
			if !refs[o.ref.SHA256] || o.size > maxScannedBlob {
				continue
			}
			attrs, err := store.Stat(ctx, o.ref)
			if err != nil || !strings.HasPrefix(attrs.MediaType, "application/json") {
				continue
			}
			data, _, err := blob.ReadAll(ctx, store, o.ref)
			if err != nil {
				continue
			}
			before := len(refs)
			note(data)
			grew = grew || len(refs) > before
		}
	}
	for _, o := range all {
		if refs[o.ref.SHA256] {
			continue
		}
		if err := store.Delete(ctx, o.ref); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		rep.Blobs++
		rep.BlobBytes += o.size
	}
	return nil
}

// scanStream calls fn with every event left in the stream.
func scanStream(ctx context.Context, stream jetstream.Stream, fn func([]byte)) error {
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("prune: stream: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	c, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("prune: read the stream: %w", err)
	}
	for {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("prune: read the stream: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			fn(m.Data())
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("prune: event metadata: %w", err)
			}
			if md.Sequence.Stream >= info.State.LastSeq {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("prune: read the stream: %w", err)
		}
		if got == 0 {
			return fmt.Errorf("prune: the stream ended before sequence %d", info.State.LastSeq)
		}
	}
}
