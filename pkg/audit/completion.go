package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// completions re-derives every completion of every audited batch: the first pass's and
// one per finished redrive, each from the job records as they were when it was built, with
// the rules' own fold (rulebook.Fold). Its summary, digest chain and each manifest are
// compared with the announcements of its attempt and the stored blobs, byte for byte:
// a completion carries the time of the input that completed it, so nothing in a manifest
// is left that a replay cannot re-derive. They are taken in stream order, so the batch's
// reported digest and summary are those of its latest completion, the one its header keeps.
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

// complete checks one completion against the stream and the stored manifests.
func (a *auditor) complete(bk batchKey, b *simBatch, c *simCompletion) {
	built, err := c.Fold().Complete(c.By.ACID, c.Attempt)
	if err != nil {
		a.add(Mismatch{Kind: KindMismatch, Tenant: bk.tenant, Batch: bk.batch, Field: "completion", Detail: err.Error()})
		return
	}
	comp := built.Completion
	b.digest = comp.Digest
	sum := comp.Summary
	b.summary = &sum
	for _, e := range rulebook.CompletionEvents(bk.tenant, bk.batch, &comp) {
		m, ok := e.Payload.(*events.ManifestEmitted)
		if !ok {
			a.check(expectation{ev: e, from: c.by, what: "batch completion"})
			continue
		}
		rec := a.unclaimed(e.ID, events.TypeManifestEmitted)
		a.check(expectation{ev: e, from: c.by, what: string(m.Kind) + " manifest announcement"})
		if rec == nil {
			continue
		}
		recorded := rec.Event.Payload.(*events.ManifestEmitted)
		a.checkManifest(bk, rec, c.by, m.Kind, recorded.Manifest, built.Manifests[m.Kind])
	}
}

// checkManifest reads a stored manifest back and compares it with the rebuilt one.
func (a *auditor) checkManifest(bk batchKey, rec, from *Recorded, k events.Kind, stored events.Blob, rebuilt []byte) {
	if a.store == nil {
		a.note(bk, "stored manifests", "the audit was given no blob store")
		return
	}
	data, err := a.readBlob(bk.tenant, stored.SHA256)
	if err != nil {
		a.add(a.at(rec, Mismatch{Kind: KindUnreadable, Field: "manifest", Recorded: stored.SHA256,
			Detail: fmt.Sprintf("the stored %s manifest cannot be read back intact: %v", k, err)}))
		return
	}
	a.rep.Decisions++
	if sha := sha256.Sum256(data); hex.EncodeToString(sha[:]) == hex.EncodeToString(sha256Of(rebuilt)) {
		return
	}
	diffs, err := diffJSON(data, rebuilt)
	if err != nil {
		a.add(a.at(rec, Mismatch{Kind: KindMismatch, Field: "manifest", Detail: err.Error()}))
		return
	}
	for _, d := range diffs {
		a.add(a.from(a.at(rec, with(Mismatch{}, KindMismatch, "manifest("+string(k)+")."+d.path, d.recorded, d.derived)), from))
	}
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
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
func CheckState(rep *Report, h *records.Batch, recs []*records.Job) {
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
			rep.Mismatches = append(rep.Mismatches, with(m, KindMismatch, "status", string(r.Status), string(d.Status)))
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
