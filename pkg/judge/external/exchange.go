package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// ErrAnswered is returned by Answer for a call that already has another answer: an
// answer is final.
var ErrAnswered = errclass.New(errclass.Conflict, "the call was answered already")

// EventMediaType is the media type a prompt's gated event is stored under.
const EventMediaType = "application/vnd.tribunal.event+msgpack"

// Exchange holds the external judge's calls: prompts published, answers given. It is a
// key-value bucket (one key per call, every change a compare-and-set) and the blob store
// the prompts' parts are kept in.
type Exchange struct {
	kv    kv.KV
	store blob.Store
}

// Open opens the exchange on js, creating its bucket when it is missing, with prompts'
// parts in store. replicas is the bucket's replication factor, the deployment's own
// (bus.Config.Replicas, `--replicas`): a call parked on a three-member cluster must
// survive losing the member that holds it, as the stream and every other bucket do. 0 is
// 1, the single server's. An existing bucket is scaled to it, as bus.Provision scales the
// others, and a request the cluster cannot answer for the moment is asked again until ctx
// ends.
func Open(ctx context.Context, js jetstream.JetStream, store blob.Store, replicas int) (*Exchange, error) {
	replicas = max(replicas, 1)
	if replicas > bus.MaxReplicas {
		return nil, fmt.Errorf("external judge bucket %s: replicas %d: want 1 to %d", Bucket, replicas, bus.MaxReplicas)
	}
	var b jetstream.KeyValue
	err := bus.RetryTransient(ctx, func(ctx context.Context) error {
		var err error
		b, err = js.CreateOrUpdateKeyValue(ctx, BucketConfig(replicas))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("external judge bucket %s: %w", Bucket, err)
	}
	return New(b, store), nil
}

// BucketConfig is the exchange's bucket at replicas copies (file storage, one revision
// per call: every change is a compare-and-set on the latest).
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		Description: "the external judge's prompts and answers (pkg/judge/external)"}
}

// New is an exchange over an open bucket and a blob store.
func New(kv kv.KV, store blob.Store) *Exchange { return &Exchange{kv: kv, store: store} }

// Get reads a call's record and its revision; nil and 0 when nothing is recorded yet.
func (x *Exchange) Get(ctx context.Context, id CallID) (*Call, uint64, error) {
	if err := id.validate(); err != nil {
		return nil, 0, err
	}
	// A bucket just created on a cluster, or one whose stream is electing a leader, has
	// no responder for a moment; a read is safe to ask again.
	var ent jetstream.KeyValueEntry
	err := bus.RetryUnapplied(ctx, func(ctx context.Context) error {
		var err error
		ent, err = x.kv.Get(ctx, id.key())
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("external call %s: %w", id, err)
	}
	var c Call
	if err := json.Unmarshal(ent.Value(), &c); err != nil {
		return nil, 0, fmt.Errorf("external call %s: record: %w", id, err)
	}
	return &c, ent.Revision(), nil
}

// update applies change to the call's record by compare-and-set, reading it again after a
// conflict. change gets nil for a call nothing is recorded of yet and returns the record
// to store, or nil to store nothing.
func (x *Exchange) update(ctx context.Context, id CallID, change func(*Call) (*Call, error)) (*Call, error) {
	for tries := 0; ; tries++ {
		cur, rev, err := x.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := change(cur)
		if err != nil || next == nil {
			return cur, err
		}
		next.ID = id
		data, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("external call %s: %w", id, err)
		}
		err = bus.RetryUnapplied(ctx, func(ctx context.Context) error { return kv.CompareAndSet(ctx, x.kv, id.key(), data, rev) })
		if err == nil {
			return next, nil
		}
		if !kv.IsConflict(err) && !errors.Is(err, jetstream.ErrKeyExists) || tries >= 16 {
			return nil, fmt.Errorf("external call %s: store: %w", id, err)
		}
	}
}

// Answer records the answer to a call, before or after its prompt was published. The same
// answer again changes nothing; another answer to a call that has one is ErrAnswered.
func (x *Exchange) Answer(ctx context.Context, id CallID, a Answer) error {
	if (a.Content == "") == (a.Missing == "") {
		return fmt.Errorf("external call %s: an answer has content or says why it is missing, not both or neither", id)
	}
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	_, err := x.update(ctx, id, func(c *Call) (*Call, error) {
		if c == nil {
			return &Call{Answer: &a}, nil
		}
		if c.Answer != nil {
			if c.Answer.same(a) {
				return nil, nil
			}
			return nil, fmt.Errorf("%w: %s has the answer %s (by %s); a new judgment needs a new iteration", ErrAnswered, id, c.Answer.Describe(), c.Answer.By)
		}
		n := *c
		n.Answer = &a
		return &n, nil
	})
	return err
}

// Describe is the answer as a message quotes it.
func (a Answer) Describe() string {
	if a.Missing != "" {
		return "(none: " + a.Missing + ")"
	}
	const max = 200
	if len(a.Content) > max {
		return a.Content[:max] + "…"
	}
	return a.Content
}

// MarkResumed records that the verdict of the job of ids was published from their answers.
func (x *Exchange) MarkResumed(ctx context.Context, at time.Time, ids ...CallID) error {
	for _, id := range ids {
		_, err := x.update(ctx, id, func(c *Call) (*Call, error) {
			if c == nil || c.Answer == nil || c.Resumed != nil {
				return nil, nil
			}
			n := *c
			n.Resumed = &at
			return &n, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Calls lists the calls recorded for a batch, by job, iteration, attempt and order.
func (x *Exchange) Calls(ctx context.Context, tenant, batch string) ([]Call, error) {
	for field, v := range map[string]string{"tenant": tenant, "batch": batch} {
		if err := events.ValidateName(v); err != nil {
			return nil, fmt.Errorf("external calls: %s: %w", field, err)
		}
	}
	lister, err := x.kv.ListKeysFiltered(ctx, "c."+tenant+"."+batch+".>")
	if err != nil {
		return nil, fmt.Errorf("external calls of %s/%s: %w", tenant, batch, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []Call
	for _, k := range keys {
		ent, err := x.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("external call %s: %w", k, err)
		}
		var c Call
		if err := json.Unmarshal(ent.Value(), &c); err != nil {
			return nil, fmt.Errorf("external call %s: record: %w", k, err)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].ID, out[j].ID
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		if a.Iteration != b.Iteration {
			return a.Iteration < b.Iteration
		}
		if a.Attempt != b.Attempt {
			return a.Attempt < b.Attempt
		}
		return a.Seq < b.Seq
	})
	return out, nil
}

// Resumable picks, from calls, every recorded call of each job that the judge parked and
// that has an answer not yet resumed: the jobs whose judge step can go on. Each job's
// first call with a published prompt comes first, the one its gated event is read from.
func Resumable(calls []Call) [][]Call {
	var out [][]Call
	for i := 0; i < len(calls); {
		j := i
		for j < len(calls) && calls[j].ID.sameJob(calls[i].ID) {
			j++
		}
		job := calls[i:j]
		ready, prompted := false, -1
		for k, c := range job {
			ready = ready || c.Prompt != nil && c.Answer != nil && c.Resumed == nil
			if prompted < 0 && c.Prompt != nil {
				prompted = k
			}
		}
		if ready {
			// A kind that asks several times may have had its first call answered at once
			// and a later one parked: the parked one holds the gated event.
			ordered := append([]Call{job[prompted]}, job[:prompted]...)
			out = append(out, append(ordered, job[prompted+1:]...))
		}
		i = j
	}
	return out
}

// Gated reads the gated event a published prompt was built from, and the SHA-256 of the
// bytes the judge received it as (the digest its link names).
func (x *Exchange) Gated(ctx context.Context, c Call) (events.Event, string, error) {
	if c.Prompt == nil {
		return events.Event{}, "", fmt.Errorf("external call %s: no prompt was published", c.ID)
	}
	data, _, err := blob.ReadAll(ctx, x.store, blob.Ref{Tenant: c.ID.Tenant, SHA256: c.Prompt.Gated.SHA256})
	if err != nil {
		return events.Event{}, "", fmt.Errorf("external call %s: gated event: %w", c.ID, err)
	}
	ev, err := events.Decode(data)
	if err != nil {
		return events.Event{}, "", fmt.Errorf("external call %s: gated event: %w", c.ID, err)
	}
	id, digest, ok := events.ParseLink(c.Prompt.Link)
	if !ok || id != ev.ID {
		return events.Event{}, "", fmt.Errorf("external call %s: link %q does not name the gated event %s", c.ID, c.Prompt.Link, ev.ID)
	}
	if ev.Tenant != c.ID.Tenant || ev.BatchID != c.ID.Batch || ev.JobID != c.ID.Job || ev.Type != events.TypeGatesDone {
		return events.Event{}, "", fmt.Errorf("external call %s: the stored event is %s of %s/%s/%s", c.ID, ev.Type, ev.Tenant, ev.BatchID, ev.JobID)
	}
	return ev, digest, nil
}

// Request reads a published prompt's request.
func (x *Exchange) Request(ctx context.Context, c Call) (*RequestRecord, error) {
	if c.Prompt == nil {
		return nil, fmt.Errorf("external call %s: no prompt was published", c.ID)
	}
	data, _, err := blob.ReadAll(ctx, x.store, blob.Ref{Tenant: c.ID.Tenant, SHA256: c.Prompt.Request.SHA256})
	if err != nil {
		return nil, fmt.Errorf("external call %s: request: %w", c.ID, err)
	}
	var r RequestRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("external call %s: request: %w", c.ID, err)
	}
	return &r, nil
}

// ReadAttachment reads the bytes of one of a call's attachments.
func (x *Exchange) ReadAttachment(ctx context.Context, id CallID, a Attachment) ([]byte, error) {
	data, _, err := blob.ReadAll(ctx, x.store, blob.Ref{Tenant: id.Tenant, SHA256: a.Blob.SHA256})
	if err != nil {
		return nil, fmt.Errorf("external call %s: %s: %w", id, a.Name, err)
	}
	return data, nil
}

// put stores data as a blob of the call's tenant.
func (x *Exchange) put(ctx context.Context, tenant string, data []byte, mediaType string) (events.Blob, error) {
	a, err := blob.PutBytes(ctx, x.store, tenant, data, mediaType)
	if err != nil {
		return events.Blob{}, err
	}
	return events.Blob{SHA256: a.Ref.SHA256, MediaType: mediaType, Size: a.Size}, nil
}
