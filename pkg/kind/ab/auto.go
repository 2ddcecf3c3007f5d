package ab

import (
	"fmt"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// Defaults of `positions: auto` (docs/judging.md, "positions: auto").
const (
	// DefaultAutoConfidence: a first answer less confident than this is asked again in
	// the other order. It sits above the default routing threshold (0.75), so every
	// answer whose confidence would decide its route on its own is checked.
	DefaultAutoConfidence = 0.8
	// DefaultAutoFlipRate: a judge is trusted in one order only once its flip rate is
	// shown to be at most this, the rate docs/judging.md says to act above.
	DefaultAutoFlipRate = 0.1
	// MaxFlipBatches bounds a tenant's flip history to its most recent batches, so a
	// judge that changed (a new model version behind the same name) is judged on what it
	// does now.
	MaxFlipBatches = 50
)

// ResolveAutoSwap is the rule an ab job with positions auto records: the batch's
// values where it sets them, else the defaults.
func ResolveAutoSwap(confidence, flipRate *float64) *events.AutoSwap {
	a := &events.AutoSwap{Confidence: DefaultAutoConfidence, FlipRate: DefaultAutoFlipRate}
	if confidence != nil {
		a.Confidence = *confidence
	}
	if flipRate != nil {
		a.FlipRate = *flipRate
	}
	return a
}

// FlipCount is how many of a judge's swapped pairs flipped.
type FlipCount struct {
	Pairs int `json:"pairs"`
	Flips int `json:"flips"`
}

// FlipBatch is one completed batch's swapped pairs by judge ("provider/model").
type FlipBatch struct {
	Batch  string               `json:"batch"`
	Judges map[string]FlipCount `json:"judges"`
}

// FlipHistory is a tenant's measured flip rates: the swapped pairs of its most recent
// batches, by judge. The aggregator records each completed batch (Record); `positions:
// auto` reads it before deciding whether one order is enough for a judge. It lives in
// the judge-call cache bucket under FlipHistoryKey, beside the answers it describes;
// clearing that bucket forgets it, and auto then swaps every AC again until the judge
// has shown its flip rate anew.
type FlipHistory struct {
	Batches []FlipBatch `json:"batches"`
}

// FlipHistoryKey is a tenant's flip history's key in the cache bucket.
func FlipHistoryKey(tenant string) string { return "ab.flips." + tenant }

// Count adds up a judge's pairs and flips over the history.
func (h *FlipHistory) Count(judge string) FlipCount {
	var c FlipCount
	for _, b := range h.Batches {
		bc := b.Judges[judge]
		c.Pairs += bc.Pairs
		c.Flips += bc.Flips
	}
	return c
}

// Record sets a batch's counts (judges without pairs are left out), replacing what an
// earlier completion of the same batch recorded, so recording twice changes nothing; the
// oldest batches beyond MaxFlipBatches are dropped. It reports whether the history
// changed.
func (h *FlipHistory) Record(batch string, counts map[string]FlipCount) bool {
	b := FlipBatch{Batch: batch, Judges: map[string]FlipCount{}}
	for j, c := range counts {
		if c.Pairs > 0 {
			b.Judges[j] = c
		}
	}
	i := slices.IndexFunc(h.Batches, func(x FlipBatch) bool { return x.Batch == batch })
	if i >= 0 {
		if equalCounts(h.Batches[i].Judges, b.Judges) {
			return false
		}
		h.Batches = slices.Delete(h.Batches, i, i+1)
	} else if len(b.Judges) == 0 {
		return false
	}
	if len(b.Judges) > 0 {
		h.Batches = append(h.Batches, b)
	}
	if n := len(h.Batches); n > MaxFlipBatches {
		h.Batches = slices.Clone(h.Batches[n-MaxFlipBatches:])
	}
	return true
}

func equalCounts(a, b map[string]FlipCount) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// DecideSwap decides whether positions auto asks judge for the swapped order after its
// first answer, and says why. It swaps when the judge's flip rate on earlier batches is
// not shown to be at most the rule's (the upper end of its Wilson interval is above it,
// which includes a judge never measured: nothing is known), or when the first answer's
// confidence is below the rule's. A first call without an answer is not asked again: the
// job is blocked or a schema violation whatever the other order says.
func DecideSwap(first events.Vote, history FlipCount, rule events.AutoSwap) (bool, string) {
	if first.Status != events.VoteOK {
		return false, "the first call has no answer"
	}
	if r := stats.Wilson95(history.Flips, history.Pairs); r.Hi > rule.FlipRate {
		return true, fmt.Sprintf("flip rate %d/%d, its upper bound %.3f above %g", history.Flips, history.Pairs, r.Hi, rule.FlipRate)
	}
	if first.Confidence < rule.Confidence {
		return true, fmt.Sprintf("confidence %.2f below %g", first.Confidence, rule.Confidence)
	}
	return false, fmt.Sprintf("confidence %.2f and a flip rate shown to be at most %g", first.Confidence, rule.FlipRate)
}
