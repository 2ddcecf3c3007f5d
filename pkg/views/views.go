// Package views keeps the state of rubric views across iterations and runs: the loop
// counters, the previous render (for unchanged detection and the judge's pairwise rank),
// the snapshot baseline kept at sign-off, and the sign-off itself. The aggregator writes
// it by compare-and-set; the gater reads it.
package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/argus"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Record is one view's state.
type Record struct {
	Loop argus.LoopState `json:"loop"`
	// PrevRender is the render the last iteration recorded.
	PrevRender *events.Blob `json:"prev_render,omitempty"`
	// Baseline is the render kept at sign-off: the snapshot gate compares with it.
	Baseline *events.Blob `json:"baseline,omitempty"`
	// LastVerdict is the last normalized verdict.
	LastVerdict *argus.Verdict `json:"last_verdict,omitempty"`
	// SignOff is the view's sign-off, once it has one.
	SignOff *argus.SignOff `json:"signoff,omitempty"`
	// LastApplied is the id of the last event applied to the loop, and LastDecision its
	// decision: a redelivered event gets the same decision without counting twice.
	LastApplied  string         `json:"last_applied,omitempty"`
	LastDecision argus.Decision `json:"last_decision"`
}

// ErrNoChange, returned by an Update change function, leaves the record as it is.
var ErrNoChange = errors.New("no change")

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Key is a view's key in the views bucket: per tenant, so one team's loop never touches
// another's.
func Key(tenant string, rs *events.RubricSpec) string {
	part := func(s string) string { return unsafe.ReplaceAllString(s, "_") }
	return tenant + "." + part(rs.Feature) + "." + part(rs.Target) + "." + part(rs.State) + "." + part(rs.Appearance)
}

// Load reads a view's record and revision; a view never seen before is a zero record at
// revision 0.
func Load(ctx context.Context, kv bus.KV, key string) (Record, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, nil
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("load view %s: %w", key, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, 0, fmt.Errorf("view %s: corrupt record: %w", key, err)
	}
	return r, e.Revision(), nil
}

// Update applies change by compare-and-set, reloading on a conflict.
func Update(ctx context.Context, kv bus.KV, key string, change func(*Record) error) (Record, error) {
	for attempt := 0; ; attempt++ {
		r, rev, err := Load(ctx, kv, key)
		if err != nil {
			return Record{}, err
		}
		if err := change(&r); err != nil {
			if errors.Is(err, ErrNoChange) {
				return r, nil
			}
			return Record{}, err
		}
		data, err := json.Marshal(r)
		if err != nil {
			return Record{}, err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, data)
		} else {
			_, err = kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return r, nil
		}
		if !bus.IsConflict(err) || attempt > 50 {
			return Record{}, fmt.Errorf("update view %s: %w", key, err)
		}
	}
}

// Apply records one loop step on the view and returns its decision: the verdict, an
// unchanged render (confirm without an edit) or, with neither, a gate failure. The
// aggregator calls it inside its compare-and-set and the audit calls it on its rebuilt
// views, so a replay re-derives decisions with exactly the rules that made them. Callers
// handle idempotency (LastApplied) themselves.
func (v *Record) Apply(tenant string, rs *events.RubricSpec, verdict *argus.Verdict, unchanged bool, render *events.Blob, params argus.LoopParams, now time.Time) argus.Decision {
	if v.Loop.Feature == "" {
		v.Loop = argus.NewLoopState(rs.Feature, rs.Target+"/"+rs.State+"/"+rs.Appearance, rs.ReferenceSource)
	}
	var d argus.Decision
	switch {
	case verdict != nil:
		v.Loop, d = v.Loop.Record(*verdict, params)
		v.LastVerdict = verdict
	case unchanged:
		v.Loop, d = v.Loop.Unchanged(params)
	default:
		v.Loop, d = v.Loop.GateFail(params)
	}
	if render != nil && (verdict != nil || unchanged) {
		// Advance the previous render only now: the judge has used the old one.
		v.PrevRender = render
	}
	if d.ShouldSignoff && rs.Mode != events.ModeReportOnly {
		v.Baseline = render
		so := argus.NewSignOff(rs.Feature, argus.View{Target: rs.Target, State: rs.State, Appearance: rs.Appearance},
			v.Loop, v.LastVerdict, blobKey(tenant, render), now)
		v.SignOff = &so
	}
	return d
}

// blobKey is a render's storage key as a sign-off records it.
func blobKey(tenant string, b *events.Blob) string {
	if b == nil {
		return ""
	}
	return blob.Ref{Tenant: tenant, SHA256: b.SHA256}.Key()
}

// Clone returns a deep copy, so a rule can change it while the original stays as loaded.
func (v Record) Clone() Record {
	data, err := json.Marshal(v)
	if err != nil {
		panic("views: a record that does not encode: " + err.Error())
	}
	var c Record
	if err := json.Unmarshal(data, &c); err != nil {
		panic("views: a record that does not decode: " + err.Error())
	}
	return c
}

// Put stores r over the revision it was loaded at (0: a view never stored). It reports
// false, storing nothing, when someone else changed the view since.
func Put(ctx context.Context, kv bus.KV, key string, r Record, rev uint64) (bool, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("encode view %s: %w", key, err)
	}
	if rev == 0 {
		_, err = kv.Create(ctx, key, data)
	} else {
		_, err = kv.Update(ctx, key, data, rev)
	}
	if err == nil {
		return true, nil
	}
	if bus.IsConflict(err) {
		return false, nil
	}
	return false, fmt.Errorf("store view %s: %w", key, err)
}
