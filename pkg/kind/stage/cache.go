package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// SharedCacheTenant stands for the tenant in the judge-call cache keys of a judge that
// shares its cache across tenants (JudgeEnv.ShareCache). It cannot be a tenant name.
const SharedCacheTenant = "*shared*"

// CacheKey is a judge-call cache key: the kind, the tenant, the provider, the model, the
// prompt, the sampling parameters and every input part. Each part is written with a
// separator, so no two different inputs make the same key. The tenant is part of the key:
// an answer one team paid for is never served to another, and a cache hit never tells a
// team that another judged the same content. Only an operator's opt-in (ShareCache) puts
// SharedCacheTenant in its place.
func (e *JudgeEnv) CacheKey(k events.Kind, tenant, model, promptHash string, parts ...string) string {
	if e.ShareCache {
		tenant = SharedCacheTenant
	}
	h := sha256.New()
	for _, p := range append([]string{string(k), tenant, e.Provider.Name(), model, promptHash, ParamsKey(e.Params)}, parts...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return string(k) + "." + hex.EncodeToString(h.Sum(nil))
}

// ParamsKey renders the sampling parameters for cache keys.
func ParamsKey(p judge.Params) string {
	k := "m" + strconv.Itoa(p.MaxTokens)
	if p.Temperature != nil {
		k += ",t" + strconv.FormatFloat(float64(*p.Temperature), 'g', -1, 32)
	}
	if p.Seed != nil {
		k += ",s" + strconv.Itoa(*p.Seed)
	}
	return k
}

// Cached reads an answer from the judge-call cache into into. A miss, a read error (logged)
// or an entry that does not decode all ask the provider again.
func (e *JudgeEnv) Cached(ctx context.Context, key string, into any) bool {
	if e.Cache == nil {
		return false
	}
	var ent jetstream.KeyValueEntry
	err := cacheCall(ctx, func(ctx context.Context) error {
		var err error
		ent, err = e.Cache.Get(ctx, key)
		return err
	})
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) && e.Log != nil {
			e.Log.WarnContext(ctx, "judge cache read failed", "err", err)
		}
		return false
	}
	return records.Unmarshal(ent.Value(), into) == nil
}

// Remember caches a valid answer. An outage or a schema violation is worth asking again
// next time, so only status ok is kept.
func (e *JudgeEnv) Remember(ctx context.Context, key string, status events.VoteStatus, v any) {
	if e.Cache == nil || status != events.VoteOK {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	err = cacheCall(ctx, func(ctx context.Context) error {
		_, err := e.Cache.Put(ctx, key, data)
		return err
	})
	if err != nil && e.Log != nil {
		e.Log.WarnContext(ctx, "judge cache write failed", "err", err)
	}
}

// cacheBound bounds a cache read or write with its retries.
const cacheBound = 15 * time.Second

// cacheCall makes a cache request the way every other JetStream request is made, each
// attempt with a short deadline asked again while the cluster cannot answer (a bucket
// whose leader died answers nothing until its successor is elected). With one long
// deadline instead, a leader kill held every judge handler for the whole of it (5 s on
// the cluster benchmark). A read that still fails is a miss, which costs a provider
// call; a write that fails costs a later one: neither fails the verdict.
func cacheCall(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, cacheBound)
	defer cancel()
	return bus.RetryTransient(ctx, f) // a missing key is an answer, not transient
}

// Model is the model a gated job asks: the first judge it names, else the provider's
// default.
func (e *JudgeEnv) Model(gd *events.GatesDone) string {
	if len(gd.Judges) > 0 && gd.Judges[0] != "" {
		return gd.Judges[0]
	}
	return e.Provider.DefaultModel()
}

// Recorder wraps the provider for one judge call, keeping what the call sends and
// receives for KeepCall.
func (e *JudgeEnv) Recorder() *judge.Recording { return judge.Record(e.Provider) }

// KeepCall stores what a judge call sent and received as a blob under the tenant and
// returns its reference for the vote (nil when the call sent nothing, or the record could
// not be stored: a reviewer's convenience is never worth failing a verdict over).
func (e *JudgeEnv) KeepCall(ctx context.Context, tenant string, r *judge.Recording) *events.Blob {
	return KeepCall(ctx, e.Store, e.Log, tenant, r)
}

// KeepCall stores a call record (JudgeEnv.KeepCall; the equivalence runner keeps its
// calls the same way).
func KeepCall(ctx context.Context, store blob.Store, log *slog.Logger, tenant string, r *judge.Recording) *events.Blob {
	rec := r.Record()
	if rec == nil || store == nil {
		return nil
	}
	data, err := rec.Encode()
	if err == nil {
		var a blob.Attrs
		if a, err = blob.PutBytes(ctx, store, tenant, data, judge.CallRecordMediaType); err == nil {
			return &events.Blob{SHA256: a.Ref.SHA256, MediaType: judge.CallRecordMediaType, Size: a.Size}
		}
	}
	if log != nil {
		log.WarnContext(ctx, "judge call record not kept", "tenant", tenant, "err", err)
	}
	return nil
}

// CachedCall makes one judge call of a kind, answered from the judge-call cache under key
// when it can be: otherwise call asks the provider (through a recorder, so the exchange is
// kept beside the vote) and a valid answer is cached. cached says the answer came from the
// cache; an error is the context's, ended during the call.
func CachedCall[T any](ctx context.Context, e *JudgeEnv, tenant, key string, call func(judge.Provider) judge.Outcome[T]) (o judge.Outcome[T], cached bool, err error) {
	if e.Cached(ctx, key, &o) {
		// A hit makes no call: it costs nothing, and saved what the call it repeats cost.
		o.Usage.Saved, o.Usage.Cost = o.Usage.Cost, 0
		return o, true, nil
	}
	rec := e.Recorder()
	o = call(rec)
	if err := ctx.Err(); err != nil {
		return o, false, err
	}
	o.Usage.Call = e.KeepCall(ctx, tenant, rec)
	e.Remember(ctx, key, o.Status, o)
	return o, false, nil
}

// TrialParams are the sampling parameters of a job's later trial (trial > 0): the seed
// moved by the trial's number (from 0 when none is set), so a server that honours seeds
// samples each trial anew. The seed sent is recorded on the vote's sampling.
func TrialParams(p judge.Params, trial int) judge.Params {
	if trial <= 0 {
		return p
	}
	seed := trial
	if p.Seed != nil {
		seed += *p.Seed
	}
	p.Seed = &seed
	return p
}
