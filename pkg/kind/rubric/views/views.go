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

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kv"
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
	// LastPrevious is the render the last applied event's judge ranked against (PrevRender
	// before it was applied): the view is stored before its job's record, so a step applied
	// again after the record's write conflicted names the same previous render as once.
	LastPrevious *events.Blob `json:"last_previous,omitempty"`
	// Generation numbers the view's loops: 0 for its first; an operator's reset or a
	// changed origin starts the next.
	Generation int `json:"generation,omitempty"`
	// Origin is what the current loop was started from; nil for a record stored before
	// origins were kept, which adopts the next step's origin without a new loop.
	Origin *Origin `json:"origin,omitempty"`
	// Reset is the operator's reset that started the current loop, if one did.
	Reset *Reset `json:"reset,omitempty"`
	// Began says what started the current loop: the files whose change did (spec.json,
	// spec.md, tokens.json, contrast-pairs.json, rubric.json, reference) or "reset";
	// empty for the view's first loop.
	Began []string `json:"began,omitempty"`
}

// Origin is what a view's loop judges against: the digests of the feature's documents,
// its rubric and its reference image. The seed's loop converges on one fixed target ("the
// spec is the immutable target"); when the target changes, the attempts, frozen dimensions
// and spent budget of the old one say nothing about the new one, so a step planned from
// another origin starts a new loop.
type Origin struct {
	SpecJSON  string `json:"spec_json"`
	SpecText  string `json:"spec_text"`
	Tokens    string `json:"tokens"`
	Pairs     string `json:"pairs,omitempty"`
	Rubric    string `json:"rubric"`
	Reference string `json:"reference,omitempty"`
}

// OriginOf is the origin a view's job was planned from.
func OriginOf(rs *rubricwire.Spec) Origin {
	o := Origin{SpecJSON: rs.SpecJSON.SHA256, SpecText: rs.SpecText.SHA256, Tokens: rs.Tokens.SHA256, Rubric: rs.Rubric.SHA256}
	if rs.Pairs != nil {
		o.Pairs = rs.Pairs.SHA256
	}
	if rs.Reference != nil {
		o.Reference = rs.Reference.SHA256
	}
	return o
}

// Changes names what differs between o and n, in the feature's file names.
func (o Origin) Changes(n Origin) []string {
	var out []string
	for _, c := range []struct {
		name string
		a, b string
	}{
		{argus.SpecFile, o.SpecJSON, n.SpecJSON}, {argus.SpecTextFile, o.SpecText, n.SpecText},
		{"tokens.json", o.Tokens, n.Tokens}, {"contrast-pairs.json", o.Pairs, n.Pairs},
		{"rubric.json", o.Rubric, n.Rubric}, {"reference", o.Reference, n.Reference},
	} {
		if c.a != c.b {
			out = append(out, c.name)
		}
	}
	return out
}

// Reset is an operator's reset of a view's loop, as the record keeps it.
type Reset struct {
	// Event is the view.reset event's id.
	Event  string    `json:"event"`
	At     time.Time `json:"at"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	// Loop is the loop it ended.
	Loop int `json:"loop"`
}

// restart begins the view's next loop: no iterations, attempts, frozen dimensions, last
// verdict, sign-off or snapshot baseline (the baseline is the look the old loop signed
// off, which the new target may change on purpose). The previous render stays: it is
// still the view's last frame, for the judge's pairwise rank.
func (v *Record) restart(origin *Origin, began []string) {
	v.Generation++
	v.Loop = argus.LoopState{}
	v.LastVerdict, v.SignOff, v.Baseline, v.Reset = nil, nil, nil, nil
	v.Origin, v.Began = origin, began
}

// ResetBegan is what Record.Began holds for a loop an operator's reset started.
const ResetBegan = "reset"

// For returns the view as the next loop step of a job planned as rs sees it, and what
// changed when that step starts a new loop: the record itself while rs names the
// loop's origin; a new loop (Generation+1, nothing spent) when it names another. The
// gater reads the view through it (snapshot baseline, loop iteration) and Apply records
// through it, so both agree on which loop a step belongs to.
func (v Record) For(rs *rubricwire.Spec) (Record, []string) {
	o := OriginOf(rs)
	if v.Origin == nil || v.Loop.Feature == "" {
		return v, nil
	}
	changed := v.Origin.Changes(o)
	if len(changed) == 0 {
		return v, nil
	}
	n := v.Clone()
	n.restart(&o, changed)
	return n, changed
}

// ResetLoop applies an operator's reset (a view.reset event) of loop loop: the next step
// of the view starts a new loop. A reset of a loop that is no longer the view's (reset
// already, or replaced by a changed origin) and a reset of a view with no loop yet change
// nothing; the result says whether this one did.
func (v *Record) ResetLoop(loop int, r Reset) bool {
	if loop != v.Generation || v.Loop.Feature == "" {
		return false
	}
	r.Loop = v.Generation
	v.restart(v.Origin, []string{ResetBegan})
	r.At = r.At.UTC()
	v.Reset = &r
	return true
}

// ErrNoChange, returned by an Update change function, leaves the record as it is.
var ErrNoChange = errors.New("no change")

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Key is a view's key in the views bucket: per tenant, so one team's loop never touches
// another's.
func Key(tenant string, rs *rubricwire.Spec) string {
	part := func(s string) string { return unsafe.ReplaceAllString(s, "_") }
	return tenant + "." + part(rs.Feature) + "." + part(rs.Target) + "." + part(rs.State) + "." + part(rs.Appearance)
}

// Load reads a view's record and revision; a view never seen before is a zero record at
// revision 0.
func Load(ctx context.Context, bucket kv.KV, key string) (Record, uint64, error) {
	e, err := bucket.Get(ctx, key)
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
func Update(ctx context.Context, bucket kv.KV, key string, change func(*Record) error) (Record, error) {
	for attempt := 0; ; attempt++ {
		r, rev, err := Load(ctx, bucket, key)
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
		err = kv.CompareAndSet(ctx, bucket, key, data, rev)
		if err == nil {
			return r, nil
		}
		if !kv.IsConflict(err) || attempt > 50 {
			return Record{}, fmt.Errorf("update view %s: %w", key, err)
		}
	}
}

// Apply records one loop step on the view and returns its decision and, for the first
// step of a loop that is not the view's first, what started it (Began): the verdict, an
// unchanged render (confirm without an edit) or, with neither, a gate failure. The
// aggregator calls it inside its compare-and-set and the audit calls it on its rebuilt
// views, so a replay re-derives decisions with exactly the rules that made them. Callers
// handle idempotency (LastApplied) themselves.
//
// A report-only step (the seed's "one dry iteration, no edits, no commits") changes
// nothing durable: its decision is what the step would decide, computed on a copy, and
// the view keeps its iterations, attempts, budget, previous render and sign-off.
func (v *Record) Apply(tenant string, rs *rubricwire.Spec, verdict *argus.Verdict, unchanged bool, render *events.Blob, params argus.LoopParams, now time.Time) (argus.Decision, []string) {
	if rs.Mode == events.ModeReportOnly {
		dry := v.Clone()
		spec := *rs
		spec.Mode = events.ModeHeadless
		return dry.Apply(tenant, &spec, verdict, unchanged, render, params, now)
	}
	*v, _ = v.For(rs)
	if v.Loop.Feature == "" || v.Origin == nil {
		// A loop starts (or a record kept from before origins adopts one) from this
		// step's documents.
		o := OriginOf(rs)
		v.Origin = &o
	}
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
	if d.ShouldSignoff {
		v.Baseline = render
		so := argus.NewSignOff(rs.Feature, argus.View{Target: rs.Target, State: rs.State, Appearance: rs.Appearance},
			v.Loop, v.LastVerdict, blobKey(tenant, render), now)
		v.SignOff = &so
	}
	if d.Iteration == 1 {
		return d, append([]string(nil), v.Began...)
	}
	return d, nil
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
func Put(ctx context.Context, bucket kv.KV, key string, r Record, rev uint64) (bool, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("encode view %s: %w", key, err)
	}
	err = kv.CompareAndSet(ctx, bucket, key, data, rev)
	if err == nil {
		return true, nil
	}
	if kv.IsConflict(err) {
		return false, nil
	}
	return false, fmt.Errorf("store view %s: %w", key, err)
}
