package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// completions re-derives every completion of every audited batch: the first pass's and
// one per finished redrive, each from the job records as they were when it was built.
// Its summary, digest chain and each manifest are compared with the announcements of its
// attempt and the stored blobs. They are taken in stream order, so the batch's reported
// digest and summary are those of its latest completion, the one its header keeps.
func (a *auditor) completions() {
	type done struct {
		bk batchKey
		c  *simCompletion
	}
	var all []done
	for bk := range a.audited {
		if b := a.batches[bk]; b != nil {
			for _, c := range b.completions {
				if !c.by.History {
					all = append(all, done{bk, c})
				}
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].c.by.Seq < all[j].c.by.Seq })
	for _, d := range all {
		a.complete(d.bk, a.batches[d.bk], d.c)
	}
}

// storedManifest is a manifest blob an announcement points at, as read back.
type storedManifest struct {
	rec  *Recorded
	data []byte
	ok   bool
}

// complete mirrors aggregator's buildCompletion and completionEvents: the job records as
// the completing instance loaded them, summarized (aggregator.Summarize builds the ab
// manifest with ab.BuildManifest from the re-derived comparisons), chained
// (aggregator.BatchDigest) and announced under the ids of the completion's attempt.
func (a *auditor) complete(bk batchKey, b *simBatch, c *simCompletion) {
	load := func() []*aggregator.JobRecord {
		var recs []*aggregator.JobRecord
		for _, data := range c.snapshot {
			var r aggregator.JobRecord
			if err := json.Unmarshal(data, &r); err == nil {
				recs = append(recs, &r)
			}
		}
		return recs
	}
	_, probe := aggregator.Summarize(bk.tenant, bk.batch, load(), time.Time{})
	stored := map[string]storedManifest{}
	var at time.Time
	atKnown := false
	for _, kind := range kinds {
		if _, ok := probe[kind]; !ok {
			continue
		}
		rec := a.unclaimed(events.NewID(events.TypeManifestEmitted, bk.tenant, bk.batch, "", 0, events.AttemptStep(kind, c.attempt)), events.TypeManifestEmitted)
		if rec == nil {
			continue
		}
		p := rec.Event.Payload.(*events.ManifestEmitted)
		if a.store == nil {
			a.note(bk, "stored manifests", "the audit was given no blob store")
			continue
		}
		data, err := a.readBlob(bk.tenant, p.Manifest.SHA256)
		if err != nil {
			a.add(a.at(rec, Mismatch{Kind: KindUnreadable, Field: "manifest", Recorded: p.Manifest.SHA256,
				Detail: fmt.Sprintf("the stored %s manifest cannot be read back intact: %v", kind, err)}))
			stored[kind] = storedManifest{rec: rec}
			continue
		}
		stored[kind] = storedManifest{rec: rec, data: data, ok: true}
		if t, ok := manifestTime(data); ok && !atKnown {
			at, atKnown = t, true
		}
	}
	recs := load()
	a.putBackSignoffTimes(recs, stored[events.KindRubric])
	summary, manifests := aggregator.Summarize(bk.tenant, bk.batch, recs, at)
	digest := aggregator.BatchDigest(recs)
	type built struct {
		data []byte
		ref  events.Blob
	}
	out := map[string]built{}
	for _, kind := range kinds {
		m, ok := manifests[kind]
		if !ok {
			continue
		}
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			a.add(Mismatch{Kind: KindMismatch, Tenant: bk.tenant, Batch: bk.batch, Field: "manifest", Detail: fmt.Sprintf("encode the re-derived %s manifest: %v", kind, err)})
			continue
		}
		sum := sha256.Sum256(data)
		ref := events.Blob{SHA256: hex.EncodeToString(sum[:]), MediaType: "application/json", Size: int64(len(data))}
		out[kind] = built{data, ref}
		summary.Manifests = append(summary.Manifests, ref)
	}
	b.digest, b.summary = digest, &summary
	var skip []string
	if !atKnown {
		skip = []string{"manifest"}
		a.note(bk, "manifest contents", "no stored manifest of the batch could be read back, so the aggregator's clock at completion (generated_at) is unknown and the rebuilt manifests cannot be compared byte for byte")
	}
	for _, kind := range kinds {
		bm, ok := out[kind]
		if !ok {
			continue
		}
		e := events.NewAttempt(&events.ManifestEmitted{Kind: kind, Manifest: bm.ref, ExitCode: summary.ExitCode, Digest: digest}, bk.tenant, bk.batch, "", 0, kind, c.attempt, nil)
		a.check(expectation{ev: e, ids: []string{e.ID}, from: c.by, what: kind + " manifest announcement", skip: skip})
		sm := stored[kind]
		if !atKnown || !sm.ok {
			continue
		}
		a.rep.Decisions++
		if sha := sha256.Sum256(sm.data); hex.EncodeToString(sha[:]) == bm.ref.SHA256 {
			continue
		}
		diffs, err := diffJSON(sm.data, bm.data, "generated_at")
		if err != nil {
			a.add(a.at(sm.rec, Mismatch{Kind: KindMismatch, Field: "manifest", Detail: err.Error()}))
			continue
		}
		for _, d := range diffs {
			a.add(a.from(a.at(sm.rec, with(Mismatch{}, KindMismatch, "manifest("+kind+")."+d.path, d.recorded, d.derived)), c.by))
		}
	}
	sumCopy := summary
	e := events.NewAttempt(&sumCopy, bk.tenant, bk.batch, "", 0, "", c.attempt, nil)
	var bskip []string
	if !atKnown {
		bskip = []string{"manifests"}
	}
	a.check(expectation{ev: e, ids: []string{e.ID}, from: c.by, what: "batch completion", skip: bskip})
}

// putBackSignoffTimes sets each sign-off's time to the one the stored rubric manifest
// holds: the aggregator's clock at sign-off is in no event (signoff.recorded keeps it to
// the second only).
func (a *auditor) putBackSignoffTimes(recs []*aggregator.JobRecord, sm storedManifest) {
	var m aggregator.FeatureManifest
	if !sm.ok || json.Unmarshal(sm.data, &m) != nil {
		return
	}
	at := map[string]time.Time{}
	for _, f := range m.Features {
		for _, v := range f.Views {
			if v.SignOff != nil {
				at[v.Job] = v.SignOff.SignedOffAt
			}
		}
	}
	for _, r := range recs {
		if r.Rubric != nil && r.Rubric.SignOff != nil {
			if t, ok := at[r.ACID]; ok {
				so := *r.Rubric.SignOff
				so.SignedOffAt = t
				r.Rubric.SignOff = &so
				a.note(batchKey{r.Tenant, r.Batch}, "sign-off times", "the aggregator's clock at a sign-off is in no event; taken from the stored rubric manifest")
			}
		}
	}
}

// unclaimed finds the first recorded event of id and type no expectation has matched.
func (a *auditor) unclaimed(id string, t events.Type) *Recorded {
	for _, r := range a.byID[id] {
		if !a.claimed[r] && r.Event.Type == t {
			return r
		}
	}
	return nil
}

// note records, once per batch, something that is not re-derivable.
func (a *auditor) note(bk batchKey, what, why string) {
	key := bk.tenant + "/" + bk.batch + "/" + what
	if a.noted[key] {
		return
	}
	a.noted[key] = true
	a.rep.Unverified = append(a.rep.Unverified, Unverified{Tenant: bk.tenant, Batch: bk.batch, What: what, Why: why})
}

// CheckState compares a batch's aggregator state (its header and job records, read from
// the key-value buckets with the services' credentials) with what the audit re-derived
// from the stream, and adds each difference to the report. The state is the second
// witness: a job record keeps the links of the events its outcome was derived from, so
// an event whose bytes changed after the decision is named exactly, and the header keeps
// the batch's digest.
func CheckState(rep *Report, h *aggregator.BatchHeader, recs []*aggregator.JobRecord) {
	if h == nil {
		return
	}
	sum := findBatch(rep, h.Tenant, h.Batch)
	base := Mismatch{Tenant: h.Tenant, Batch: h.Batch, EventType: "batch header"}
	if h.Completion != nil {
		switch {
		case sum == nil || sum.Summary == nil:
			rep.Mismatches = append(rep.Mismatches, with(base, KindMissing, "completion", "complete", "").
				withDetail("the batch header records a completion the replayed events do not reach"))
		default:
			rep.Decisions++
			if h.Completion.Attempt != sum.Attempt {
				rep.Mismatches = append(rep.Mismatches, with(base, KindMismatch, "completion.attempt", fmt.Sprint(h.Completion.Attempt), fmt.Sprint(sum.Attempt)).
					withDetail("the header's completion is not that of the last redrive the replayed events complete"))
			}
			if h.Completion.Digest != sum.Digest {
				rep.Mismatches = append(rep.Mismatches, with(base, KindMismatch, "completion.digest", h.Completion.Digest, sum.Digest))
			}
			diffs, err := diffMsgpack(&h.Completion.Summary, sum.Summary, "manifests")
			if err != nil {
				rep.Mismatches = append(rep.Mismatches, with(base, KindMismatch, "completion.summary", "", "").withDetail(err.Error()))
			}
			for _, d := range diffs {
				rep.Mismatches = append(rep.Mismatches, with(base, KindMismatch, "completion.summary."+d.path, d.recorded, d.derived))
			}
		}
	}
	for _, r := range recs {
		d := rep.derived[jobKey{r.Tenant, r.Batch, r.ACID}]
		m := Mismatch{Tenant: r.Tenant, Batch: r.Batch, Job: r.ACID, EventType: "job record"}
		if d == nil {
			rep.Mismatches = append(rep.Mismatches, with(m, KindMissing, "job.submitted", "", "").withDetail("the aggregator holds a record of a job the replay never submits"))
			continue
		}
		rep.Decisions++
		if r.Status != d.Status {
			rep.Mismatches = append(rep.Mismatches, with(m, KindMismatch, "status", r.Status, d.Status))
		}
		if r.DecidedBy != d.DecidedBy {
			rep.Mismatches = append(rep.Mismatches, with(m, KindMismatch, "decided_by", r.DecidedBy, d.DecidedBy))
		}
		compareLinks(rep, m, r.Inputs, d.Inputs)
	}
}

// compareLinks names the event behind each differing link of a job's chain.
func compareLinks(rep *Report, m Mismatch, state, replay []string) {
	split := func(l string) (string, string) {
		for i := len(l) - 1; i >= 0; i-- {
			if l[i] == ':' {
				return l[:i], l[i+1:]
			}
		}
		return l, ""
	}
	n := max(len(state), len(replay))
	for i := 0; i < n; i++ {
		var s, r string
		if i < len(state) {
			s = state[i]
		}
		if i < len(replay) {
			r = replay[i]
		}
		if s == r {
			continue
		}
		sid, sdig := split(s)
		rid, rdig := split(r)
		x := m
		if sid == rid {
			x.EventID = sid
			x = with(x, KindMismatch, fmt.Sprintf("inputs[%d] sha256", i), sdig, rdig).
				withDetail("the event's bytes on the stream are not those the aggregator derived its decision from")
		} else {
			x.EventID = firstNonEmpty(sid, rid)
			x = with(x, KindMismatch, fmt.Sprintf("inputs[%d]", i), s, r).
				withDetail("the aggregator derived the job from other events than the stream holds")
		}
		rep.Mismatches = append(rep.Mismatches, x)
	}
}

func findBatch(rep *Report, tenant, batch string) *BatchSummary {
	for i := range rep.Batches {
		if rep.Batches[i].Tenant == tenant && rep.Batches[i].Batch == batch {
			return &rep.Batches[i]
		}
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
