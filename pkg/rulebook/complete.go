package rulebook

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// Completed is a batch's completion: the record its header keeps, the manifests to store
// (content-addressed, so their refs are known before they are stored) and the events that
// announce it.
type Completed struct {
	Completion records.Completion
	// Manifests are each kind's manifest, encoded, by kind.
	Manifests map[events.Kind][]byte
	// Index is the batch's index (pkg/index) when the fold kept one (KeepIndex), to
	// store beside the manifests.
	Index []byte
}

// Fold accumulates what a batch's completion needs from each final job, one at a time and
// in any order, keeping only that (each kind's manifest rows, the outcome, the digest
// links) rather than whole records, so a 100,000-job batch completes without holding
// 100,000 records. The rows and links are written out as they are added (pkg/spillsort,
// in $TMPDIR): what it holds grows with the kinds, judges and outcomes met, not the
// jobs, but for the index (KeepIndex).
type Fold struct {
	tenant, batch string
	// at is the latest decision among the folded jobs: the time the completion and its
	// manifests carry. It depends on the jobs alone, not on which aggregator instance
	// happened to complete the batch or when, so a replay rebuilds the manifests byte for
	// byte.
	at  time.Time
	sum events.BatchCompleted
	// outcomes are the distinct outcomes folded: what kind.ExitCode reads of them all.
	outcomes map[kind.Outcome]bool
	// links are each job's packed links (packLinks) by batch index.
	links     *spillsort.Sorter
	key       []byte
	manifests map[events.Kind]kind.Manifest
	kinds     map[events.Kind]int
	judges    map[string]bool
	cost      price.Sum
	index     *index.Builder
	// reviewed counts the outcomes a person's review decided; reviewBy and reviewAt are
	// the latest of those decisions (Revision).
	reviewed int
	reviewBy string
	reviewAt time.Time
	// answers counts the people's answers folded in, seqs holds where the stream holds
	// the latest of them (events.BatchCompleted.ReviewSeqs).
	answers int
	seqs    []uint64
	err     error
}

// NewFold starts the completion of a batch.
func NewFold(tenant, batch string) *Fold {
	return &Fold{tenant: tenant, batch: batch, outcomes: map[kind.Outcome]bool{}, links: spillsort.New(nil),
		manifests: map[events.Kind]kind.Manifest{}, kinds: map[events.Kind]int{}, judges: map[string]bool{}}
}

// KeepIndex makes the fold build the batch's index too (the aggregator stores it; the
// audit, which rebuilds completions only to compare them, does not need one).
func (f *Fold) KeepIndex() { f.index = index.NewBuilder() }

// Add folds one final job in. The record may be reused by the caller afterwards.
func (f *Fold) Add(j *records.Job) {
	// Each part of the fold below asks the job's kind for its result: decoded once.
	if j.Memoize() {
		defer j.Forget()
	}
	if j.DecidedAt.After(f.at) {
		f.at = j.DecidedAt.UTC()
	}
	f.sum.Total++
	switch j.Status {
	case events.StatusCompared, events.StatusSignedOff, events.StatusReported, events.StatusNeedsFixes:
		f.sum.Compared++
	case events.StatusBlocked, events.StatusBudgetExhausted, events.StatusNeedsContext:
		f.sum.Blocked++
	case events.StatusSchemaViolation:
		f.sum.Violations++
	}
	o := Outcome(j)
	f.outcomes[o] = true
	if o == kind.OutcomeFinding {
		f.sum.Suggestions++
	}
	f.key = spillsort.IntKey(f.key[:0], j.Index)
	f.links.Add(f.key, packLinks(j.Inputs))
	f.review(j)
	f.kinds[j.Spec.Kind]++
	for _, n := range j.Judges {
		f.judges[n] = true
	}
	for _, c := range j.Calls {
		f.judges[c.Judge] = true
	}
	f.cost.Add(j.PricedCost())
	if f.index != nil {
		f.index.Add(index.Of(j))
	}
	k, err := kind.Lookup(j.Spec.Kind)
	if err != nil {
		if f.err == nil {
			f.err = fmt.Errorf("job %s: %w", j.Key(), err)
		}
		return
	}
	m := f.manifests[k.Name()]
	if m == nil {
		m = k.Manifest(f.tenant, f.batch)
		f.manifests[k.Name()] = m
	}
	m.Add(j)
}

// review counts a job whose outcome a person's review decided, and the people's answers
// applied to the job.
func (f *Fold) review(j *records.Job) {
	for _, r := range j.Reviews {
		f.answers += 1 + r.Changes
		for _, s := range r.Seqs {
			if s != 0 {
				f.seqs = append(f.seqs, s)
			}
		}
		if len(f.seqs) >= 4*events.MaxReviewSeqs {
			f.seqs = latestSeqs(f.seqs)
		}
	}
	for _, r := range j.Reviews {
		if !r.Decides || r.Event != j.DecidedBy {
			continue
		}
		f.reviewed++
		if j.DecidedAt.After(f.reviewAt) || j.DecidedAt.Equal(f.reviewAt) && r.Event > f.reviewBy {
			f.reviewBy, f.reviewAt = r.Event, j.DecidedAt
		}
		return
	}
}

// latestSeqs sorts seqs and keeps the latest events.MaxReviewSeqs of them.
func latestSeqs(seqs []uint64) []uint64 {
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	if n := len(seqs); n > events.MaxReviewSeqs {
		seqs = append(seqs[:0], seqs[n-events.MaxReviewSeqs:]...)
	}
	return seqs
}

// reviewSummary says in sum which people's answers the fold folded in.
func (f *Fold) reviewSummary(sum *events.BatchCompleted) {
	sum.ReviewsFolded = f.answers
	if len(f.seqs) > 0 {
		sum.ReviewSeqs = slices.Clone(latestSeqs(f.seqs))
	}
}

// Revision is what the folded jobs say of the people who decided outcomes, for a
// completion folded again after the batch completed; nil when no review decided one.
func (f *Fold) Revision() *records.Revision {
	if f.reviewed == 0 {
		return nil
	}
	return &records.Revision{Reviews: f.reviewed, By: f.reviewBy}
}

// Digest chains every folded job's inputs in batch order: the digest manifests and the
// batch header carry, so an auditor can prove which events they rest on.
func (f *Fold) Digest() string {
	if f.links == nil {
		return ""
	}
	// records.ChainDigest over every link, without a string per link and step: at a
	// 100,000-job batch's end those were about 50 MB of garbage at once, at the audit's
	// peak of memory.
	var d [2 * sha256.Size]byte
	dn := 0
	var link, msg []byte
	next := func(l []byte) {
		// records.ChainNext: the digest of the chain so far, a newline and the link.
		msg = append(append(append(msg[:0], d[:dn]...), '\n'), l...)
		sum := sha256.Sum256(msg)
		hex.Encode(d[:], sum[:])
		dn = len(d)
	}
	if err := f.links.Each(func(_, packed []byte) error {
		eachLinkBytes(packed, &link, next)
		return nil
	}); err != nil {
		// The spill file is the fold's own, written by it: one that does not read back is
		// a broken machine, not bad input (as for Memory's records).
		panic(fmt.Sprintf("rulebook: the digest links of %s: %v", records.BatchKey(f.tenant, f.batch), err))
	}
	return string(d[:dn])
}

// Complete finishes the fold: the summary with the exit code (the seed's `ab` table over
// every job of every kind), each kind's manifest and the digest. by is the job whose
// outcome completed the batch, attempt the redrive attempt it completes (0 for the first
// pass).
func (f *Fold) Complete(by string, attempt int) (Completed, error) {
	c := Completed{Manifests: map[events.Kind][]byte{}}
	comp, err := f.finish(by, attempt, false, func(k events.Kind, doc any) (events.Blob, error) {
		data, err := marshalIndent(doc)
		if err != nil {
			return events.Blob{}, err
		}
		sha := sha256.Sum256(data)
		c.Manifests[k] = data
		return events.Blob{SHA256: hex.EncodeToString(sha[:]), MediaType: "application/json", Size: int64(len(data))}, nil
	})
	c.Completion = comp
	if err != nil || f.index == nil {
		return c, err
	}
	data, err := f.index.Bytes()
	if err != nil {
		return Completed{}, fmt.Errorf("index of %s: %w", records.BatchKey(f.tenant, f.batch), err)
	}
	sha := sha256.Sum256(data)
	c.Index = data
	c.Completion.Index = &events.Blob{SHA256: hex.EncodeToString(sha[:]), MediaType: index.MediaType, Size: int64(len(data))}
	return c, nil
}

// PutBlob stores one manifest (or index) as it is encoded: r is its bytes, read to the end,
// and the blob it returns is what the completion records (its digest, size and
// mediaType, the type the fold wrote, whatever type a store kept for the same bytes).
type PutBlob func(mediaType string, r io.Reader) (events.Blob, error)

// CompleteStored is Complete for a writer that stores what it completes: each manifest
// is encoded a piece at a time (as CompleteHashed does) straight into put, never held
// whole, and the index is handed to put too; the returned Completed holds no manifest or
// index bytes. At 1,000,000 ab jobs a manifest is about 1.1 GiB of indented JSON, which
// Complete holds in memory beside the fold it was built from. It consumes the fold, as
// CompleteHashed does. The stored bytes are exactly Complete's.
func (f *Fold) CompleteStored(by string, attempt int, put PutBlob) (Completed, error) {
	comp, err := f.finish(by, attempt, true, func(_ events.Kind, doc any) (events.Blob, error) {
		return putIndented(doc, put)
	})
	if err != nil {
		return Completed{}, err
	}
	c := Completed{Completion: comp}
	if f.index == nil {
		return c, nil
	}
	// The index too is written into put as it is encoded: its entries are spilled.
	ref, encErr, err := putPiped(index.MediaType, f.index.Write, put)
	f.index.Close()
	f.index = nil
	if encErr != nil {
		return Completed{}, fmt.Errorf("index of %s: %w", records.BatchKey(f.tenant, f.batch), encErr)
	}
	if err != nil {
		return Completed{}, fmt.Errorf("store the index of %s: %w", records.BatchKey(f.tenant, f.batch), err)
	}
	c.Completion.Index = &ref
	return c, nil
}

// putIndented encodes doc as marshalIndent would, through a pipe into put: the encoder
// runs beside the store's read, so neither the encoded nor the indented form is held.
func putIndented(doc any, put PutBlob) (events.Blob, error) {
	ref, encErr, err := putPiped("application/json", func(w io.Writer) error { return streamJSON(&indenter{w: w}, doc) }, put)
	if encErr != nil {
		return events.Blob{}, encErr
	}
	return ref, err
}

// putPiped stores what write writes, through a pipe into put: the writer runs beside the
// store's read, so the blob is never held. encErr is write's error, err put's.
func putPiped(mediaType string, write func(io.Writer) error, put PutBlob) (ref events.Blob, encErr, err error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	ref, err = put(mediaType, pr)
	// A put that failed before reading to the end leaves the writer blocked on the pipe.
	pr.CloseWithError(errors.New("blob store returned"))
	encErr = <-done
	if err != nil {
		// The writer's error then is most likely the pipe closed under it.
		return events.Blob{}, nil, err
	}
	if encErr != nil {
		return events.Blob{}, encErr, nil
	}
	ref.MediaType = mediaType
	return ref, nil, nil
}

// CompleteHashed is Complete for a reader that compares manifests with stored ones rather
// than storing them (the audit): each manifest is encoded a piece at a time and its stored
// form only hashed, never held whole, and the writer compact returns for a kind (nil: none)
// is written that manifest as compact JSON. It consumes the fold, releasing what it folded
// as it goes, so a 100,000-job completion does not hold its links, its rows and its
// manifests at once.
func (f *Fold) CompleteHashed(by string, attempt int, compact func(events.Kind) io.Writer) (records.Completion, error) {
	return f.finish(by, attempt, true, func(k events.Kind, doc any) (events.Blob, error) {
		return hashIndented(doc, compact(k))
	})
}

// finish builds the completion, encoding each kind's manifest with encode; consume
// releases the fold's state once it is used.
func (f *Fold) finish(by string, attempt int, consume bool, encode func(events.Kind, any) (events.Blob, error)) (records.Completion, error) {
	if f.err != nil {
		return records.Completion{}, f.err
	}
	digest := f.Digest()
	if consume {
		f.links.Close()
		f.links = nil
	}
	sum := f.Summary()
	refs := map[events.Kind]events.Blob{}
	for _, k := range kind.All() {
		m, ok := f.manifests[k.Name()]
		if !ok {
			continue
		}
		doc := m.Build(f.at)
		var ref events.Blob
		var err error
		if doc != nil {
			ref, err = encode(k.Name(), doc)
		}
		if consume {
			// A kind's fold may hold a spill file (kind.ListFold): let it go now.
			delete(f.manifests, k.Name())
			if c, ok := m.(io.Closer); ok {
				c.Close()
			}
		}
		if doc == nil {
			continue
		}
		if err != nil {
			return records.Completion{}, fmt.Errorf("encode %s manifest of %s: %w", k.Name(), records.BatchKey(f.tenant, f.batch), err)
		}
		refs[k.Name()] = ref
		sum.Manifests = append(sum.Manifests, ref)
	}
	c := records.Completion{At: f.at, By: by, Summary: sum, Manifests: refs, Digest: digest, Attempt: attempt,
		Kinds: f.kinds, Judges: sortedKeys(f.judges)}
	if !f.cost.Zero() {
		cost := f.cost
		c.Cost = &cost
	}
	if r, ok := refs[events.KindAB]; ok {
		c.ManifestRef = &r
	}
	return c, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Summary is the completion's summary without its manifests' refs, for readers that fold
// records they did not complete (nothing is stored).
func (f *Fold) Summary() events.BatchCompleted {
	sum := f.sum
	// ExitCode reads which outcomes there are (and whether every one is blocked): the
	// distinct ones say as much as all of them.
	distinct := make([]kind.Outcome, 0, len(f.outcomes))
	for o := range f.outcomes {
		distinct = append(distinct, o)
	}
	sum.ExitCode = kind.ExitCode(distinct)
	f.reviewSummary(&sum)
	return sum
}

// CompletionEvents announce a batch's completion: one manifest.emitted per kind, in
// registry order, then batch.completed, under ids of the completion's attempt. A
// completion reviews revised announces what it announced when the batch finished
// (records.Completion.Announced), not the revision (RevisionEvents).
func CompletionEvents(tenant, batch string, c *records.Completion) []events.Event {
	summary, manifests, digest := c.Summary, c.Manifests, c.Digest
	if a := c.Announced; a != nil {
		summary, manifests, digest = a.Summary, a.Manifests, a.Digest
	}
	var out []events.Event
	for _, k := range kind.All() {
		if ref, ok := manifests[k.Name()]; ok {
			out = append(out, events.NewAttempt(&events.ManifestEmitted{Kind: k.Name(), Manifest: ref, ExitCode: summary.ExitCode, Digest: digest},
				tenant, batch, "", 0, string(k.Name()), c.Attempt, nil))
		}
	}
	return append(out, events.NewAttempt(&summary, tenant, batch, "", 0, "", c.Attempt, nil))
}

// RevisionEvents announce a completion people's late reviews revised (Runner.revise):
// one manifest.emitted per kind, in registry order, carrying the revised manifest, the
// exit code and digest of the revised completion, and who revised it (RevisedBy, the
// review behind the latest decision, and how many outcomes people decided). Their ids
// hash what they say (events.ManifestEmitted.Step), so the same revision announced again
// is dropped as a copy and another revision is announced beside it. nil for a completion
// no review revised.
func RevisionEvents(tenant, batch string, c *records.Completion) []events.Event {
	if c.Revised == nil {
		return nil
	}
	var out []events.Event
	for _, k := range kind.All() {
		ref, ok := c.Manifests[k.Name()]
		if !ok {
			continue
		}
		p := &events.ManifestEmitted{Kind: k.Name(), Manifest: ref, ExitCode: c.Summary.ExitCode, Digest: c.Digest,
			RevisedBy: c.Revised.By, Reviews: c.Revised.Reviews}
		out = append(out, events.NewAttempt(p, tenant, batch, "", 0, p.Step(), c.Attempt, nil))
	}
	return out
}

// IsRevision reports whether e announces a completion's revision (RevisionEvents).
func IsRevision(e events.Event) bool {
	m, ok := e.Payload.(*events.ManifestEmitted)
	return ok && m.RevisedBy != ""
}

// RedriveDone records on a batch header that job has its outcome in the redrive of
// attempt, and reports whether it was the redrive's last job: the batch then completes
// again for that attempt. It returns nil when the header does not change (a job of
// another attempt, or one counted already).
func RedriveDone(h *records.Batch, job string, attempt int) (next *records.Batch, last bool) {
	if h == nil || h.Redrive == nil || h.Redrive.Attempt != attempt {
		return nil, false
	}
	if h.Completion != nil && h.Completion.Attempt == attempt {
		return nil, h.Completion.By == job
	}
	pending := h.Redrive.Pending[:0:0]
	found := false
	for _, p := range h.Redrive.Pending {
		if p == job {
			found = true
			continue
		}
		pending = append(pending, p)
	}
	if !found {
		return nil, false
	}
	n := *h
	r := *h.Redrive
	r.Pending = pending
	n.Redrive = &r
	return &n, len(pending) == 0
}
