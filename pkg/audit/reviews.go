package audit

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// A person's review races with the batch's last verdict: the aggregator applies its
// inputs concurrently (several instances, a redelivery), so the completion's fold may
// read a job before a review the stream holds earlier was stored on it, or after one the
// stream holds later was. Which it folded is not a matter of stream order, so the
// completion says it (events.BatchCompleted: ReviewsFolded, and ReviewSeqs, where the
// stream holds the latest of the answers it folded), and the replay applies each answer
// where the aggregator did relative to the completion:
//
//   - an answer the completion lists that the stream holds after the input completing
//     the batch is applied just before the completion's fold (rulebook.Memory's
//     BeforeComplete), from the first read, and not again where the stream holds it;
//     one the stream holds earlier, of a job with no verdict yet there, waits for the
//     fold too (the aggregator applied it once the verdict was stored);
//   - an answer it does not list, of a job judged already, that the stream holds before
//     the completing input and where the list covers it (the list is whole, or the
//     answer is later than its earliest) is applied right after the completion, as the
//     aggregator did: a deciding one then revises the completion;
//   - any other answer goes where the stream holds it.
//
// What the replay derives is then compared as ever: the completion's manifests, digest
// and the answers it names (reviews_folded, review_seqs) with the recorded completion, so
// a list that names an answer the stream does not hold, or leaves out one it folded, is a
// finding, and so is every decision a tampered answer changes.

// reviewScan is what the first read gathers for the answers' places: each recorded
// completion's list, and the answers it lists, kept until the replay reaches the fold.
type reviewScan struct {
	folded map[completionKey]*foldedReviews
	// pending are the answers of each batch read since its last completion, until the
	// next one says which it folded; kept are the listed ones, by position.
	pending map[batchKey][]*Recorded
	kept    map[uint64]*Recorded
	// told are the places the audit gave answers while the facts were gathered
	// (ahead.live), checked against what the whole read concludes (contradicted).
	told []reviewTold
}

// reviewTold is where the audit placed an answer (seq, its job judged or not there), or,
// for a fold (seq the input completing it), how many answers it applied before it.
type reviewTold struct {
	bk      batchKey
	attempt int
	seq     uint64
	judged  bool
	fold    bool
	place   reviewPlace
	applied int
}

// reviewPlace is where an answer is applied: where the stream holds it, just before its
// batch's completion is folded, or right after.
type reviewPlace int

const (
	placeStream reviewPlace = iota
	placeBeforeFold
	placeAfterFold
)

// placeOf is where an answer at seq goes, its job judged or not there, by what the
// batch's next completion says it folded (nil: nothing recorded).
func placeOf(f *foldedReviews, seq uint64, judged bool) reviewPlace {
	switch {
	case f == nil:
		return placeStream
	case f.lists(seq) && !judged:
		return placeBeforeFold
	case !f.lists(seq) && f.covers(seq) && judged:
		return placeAfterFold
	}
	return placeStream
}

// aheadOf are the answers of batch bk that completion f folded though the stream holds
// them after pos (the input completing it), in stream order.
func (s *reviewScan) aheadOf(bk batchKey, f *foldedReviews, pos uint64) []*Recorded {
	if f == nil {
		return nil
	}
	var out []*Recorded
	for _, seq := range f.seqs {
		if r := s.kept[seq]; r != nil && seq > pos && r.Event.Tenant == bk.tenant && r.Event.BatchID == bk.batch {
			out = append(out, r)
		}
	}
	return out
}

// contradicted tells add of each batch where the audit placed an answer, while the
// facts were gathered, otherwise than the whole read places it.
func (s *reviewScan) contradicted(add func(bk batchKey, why string)) {
	for _, t := range s.told {
		f := s.folded[completionKey{t.bk, t.attempt}]
		if t.fold {
			if n := len(s.aheadOf(t.bk, f, t.seq)); n != t.applied {
				add(t.bk, fmt.Sprintf("batch %s/%s: its completion folded %d people's answers the stream holds after the input completing it", t.bk.tenant, t.bk.batch, n))
			}
		} else if placeOf(f, t.seq, t.judged) != t.place {
			add(t.bk, fmt.Sprintf("batch %s/%s: the aggregator applied the person's answer at seq %d on the other side of the batch's completion than the stream holds it", t.bk.tenant, t.bk.batch, t.seq))
		}
	}
}

type completionKey struct {
	bk      batchKey
	attempt int
}

// foldedReviews is what a recorded completion says of the answers it folded.
type foldedReviews struct {
	count int
	seqs  []uint64
}

func newReviewScan() *reviewScan {
	return &reviewScan{folded: map[completionKey]*foldedReviews{}, pending: map[batchKey][]*Recorded{}, kept: map[uint64]*Recorded{}}
}

// add notes one message of the first read (a valid event, no dead letter, no history).
func (s *reviewScan) add(r *Recorded) {
	ev := r.Event
	bk := batchKey{ev.Tenant, ev.BatchID}
	switch p := ev.Payload.(type) {
	case *events.ReviewRecorded:
		if isAggregatorInput(r) {
			s.pending[bk] = append(s.pending[bk], kept(r))
		}
	case *events.BatchCompleted:
		k := completionKey{bk, ev.Attempt}
		if s.folded[k] != nil {
			return // a copy: the first is the one the audit compares
		}
		f := &foldedReviews{count: p.ReviewsFolded, seqs: slices.Clone(p.ReviewSeqs)}
		slices.Sort(f.seqs)
		s.folded[k] = f
		for _, rv := range s.pending[bk] {
			if f.lists(rv.Seq) {
				s.kept[rv.Seq] = rv
			}
		}
		delete(s.pending, bk)
	}
}

// done ends the first read: answers no completion followed are not needed.
func (s *reviewScan) done() { s.pending = nil }

// lists reports whether the completion names the answer at seq as folded.
func (f *foldedReviews) lists(seq uint64) bool {
	_, ok := slices.BinarySearch(f.seqs, seq)
	return ok
}

// covers reports whether the list says of the answer at seq whether it was folded: it
// names every answer folded, or seq is later than the earliest it names.
func (f *foldedReviews) covers(seq uint64) bool {
	return f.count == len(f.seqs) || len(f.seqs) > 0 && seq > f.seqs[0]
}

// foldedAt is what the recorded completion of attempt says of the answers it folded;
// nil when none of it is recorded.
func (h *ahead) foldedAt(bk batchKey, attempt int) *foldedReviews {
	if h.reviews == nil {
		return nil
	}
	return h.reviews.folded[completionKey{bk, attempt}]
}

// nextCompletion is the attempt of the batch's next completion the replay has still to
// reach: the first pass's, or that of a redrive under way; false when none is to come.
func (b *simBatch) nextCompletion() (int, bool) {
	switch {
	case b.completed == 0:
		return 0, true
	case b.started >= b.completed:
		return b.started, true
	}
	return 0, false
}

// placeReview places a person's answer where the aggregator applied it relative to its
// batch's completion (see above). It reports false when the answer goes where the stream
// holds it.
func (a *auditor) placeReview(r *Recorded) bool {
	if _, ok := r.Event.Payload.(*events.ReviewRecorded); !ok || r.DeadLetter != "" || r.History {
		return false
	}
	if a.appliedAhead[r.Seq] {
		delete(a.appliedAhead, r.Seq)
		return true
	}
	ev := r.Event
	bk := batchKey{ev.Tenant, ev.BatchID}
	attempt, ok := a.batch(bk).nextCompletion()
	if !ok {
		return false
	}
	f := a.ahead.foldedAt(bk, attempt)
	if f == nil && !a.ahead.live {
		return false
	}
	j := a.mem.Job(ev.Tenant, ev.BatchID, ev.JobID)
	judged := j != nil && j.Final()
	place := placeOf(f, r.Seq, judged)
	if a.ahead.live {
		a.ahead.reviews.told = append(a.ahead.reviews.told, reviewTold{bk: bk, attempt: attempt, seq: r.Seq, judged: judged, place: place})
	}
	switch place {
	case placeBeforeFold:
		a.foldHeld[bk] = append(a.foldHeld[bk], kept(r))
	case placeAfterFold:
		a.afterHeld[bk] = append(a.afterHeld[bk], kept(r))
	default:
		return false
	}
	a.notePlaced(bk)
	return true
}

// beforeComplete applies, before batch's completion of attempt is folded, the answers
// the recorded completion folded in that the replay has not applied: those waiting for
// it and those the stream holds later.
func (a *auditor) beforeComplete(tenant, batch string, attempt int) {
	bk := batchKey{tenant, batch}
	f := a.ahead.foldedAt(bk, attempt)
	todo := a.foldHeld[bk]
	delete(a.foldHeld, bk)
	applied := 0
	for _, r := range a.ahead.reviews.aheadOf(bk, f, a.pos) {
		if !a.appliedAhead[r.Seq] {
			a.appliedAhead[r.Seq] = true
			todo = append(todo, r)
			applied++
		}
	}
	if a.ahead.live {
		a.ahead.reviews.told = append(a.ahead.reviews.told, reviewTold{bk: bk, attempt: attempt, seq: a.pos, fold: true, applied: applied})
	}
	if len(todo) == 0 {
		return
	}
	a.notePlaced(bk)
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].Seq < todo[j].Seq })
	for _, r := range todo {
		a.applyHeld(r)
	}
}

// applyHeld applies an answer taken from its stream position; one whose job is not
// recorded yet waits for its submission like any other input.
func (a *auditor) applyHeld(r *Recorded) {
	if !a.applyInput(r) {
		key := jobKey{r.Event.Tenant, r.Event.BatchID, r.Event.JobID}
		a.deferred[key] = append(a.deferred[key], r)
	}
}

// afterComplete applies the answers held for the batch's completion, now derived.
func (a *auditor) afterComplete(bk batchKey) {
	held := a.afterHeld[bk]
	delete(a.afterHeld, bk)
	for _, r := range held {
		a.applyHeld(r)
	}
}

// releaseReviews applies, at the end of the replay, the answers still held for a fold
// the replay never reached, in stream order: nothing is dropped.
func (a *auditor) releaseReviews() {
	var rest []*Recorded
	for _, rs := range a.foldHeld {
		rest = append(rest, rs...)
	}
	for _, rs := range a.afterHeld {
		rest = append(rest, rs...)
	}
	a.foldHeld, a.afterHeld = map[batchKey][]*Recorded{}, map[batchKey][]*Recorded{}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].Seq < rest[j].Seq })
	for _, r := range rest {
		a.applyHeld(r)
	}
}

func (a *auditor) notePlaced(bk batchKey) {
	a.note(bk, "where people's answers raced the batch's completion",
		"the aggregator handled them in another order than the stream holds them; the recorded completion names the answers it folded (review_seqs), and the replay applied them so")
}
