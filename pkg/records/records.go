// Package records is the aggregator's read model: the schema of the job and batch records
// kept in the JetStream key-value buckets, their keys, and the one API every package reads
// and writes them through. The aggregator writes them (by compare-and-set, from what the
// rules in pkg/rulebook decide); the client, the audit, the console and the CLI read them.
//
// A record holds no rule. What a job's outcome means for its kind is read with the kind's
// own accessors (pkg/kind/<name>), so this package knows no judge kind.
package records

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// Job is the aggregator's state for one job, kept in the jobs bucket. A final record holds
// everything needed to re-emit its outputs, so a redelivered event republishes the same
// events (dropped as duplicates) instead of deciding again.
type Job struct {
	Tenant        string         `json:"tenant"`
	Batch         string         `json:"batch"`
	ACID          string         `json:"ac_id"`
	Index         int            `json:"index"`
	BatchSize     int            `json:"batch_size"`
	BatchSource   string         `json:"batch_source,omitempty"`
	Spec          events.JobSpec `json:"spec"`
	Iteration     int            `json:"iteration"`
	CorrelationID string         `json:"correlation_id"`
	SubmittedAt   time.Time      `json:"submitted_at"`
	// Attempt is the redrive attempt the job's current outcome belongs to.
	Attempt int `json:"attempt,omitempty"`

	Status      events.Status            `json:"status"`
	BlockStage  string                   `json:"block_stage,omitempty"`
	BlockReason string                   `json:"block_reason,omitempty"`
	Decided     *events.IterationDecided `json:"decided,omitempty"`
	// Judges names every judge that contributed, "provider/model".
	Judges []string `json:"judges,omitempty"`
	// Calls are the model calls of every verdict applied to the job, in order: who
	// answered, at what cost, whether from the cache, and the stored record of what was
	// sent and received. Reviewers and the console's charts read them.
	Calls []Call `json:"calls,omitempty"`
	// Result is the kind's derived result in the kind's own JSON (ab: the comparison and
	// the votes; critic: the result; equivalence: the report and the transcripts). Only the
	// kind reads and writes it.
	Result json.RawMessage `json:"result,omitempty"`
	// Loop is a looping kind's state for this batch (rubric: the view's last loop step,
	// its decision and sign-off). Only the kind reads and writes it.
	Loop json.RawMessage `json:"loop,omitempty"`
	// Inputs are the events the job's outcome was derived from, as "<event id>:<sha256 of
	// its wire bytes>", in the order they were applied, each preceded by the stages it
	// passed through (its envelope's chain: render.requested, render.done, gates.done):
	// the links of the digest chain that manifests and sign-offs carry, so an auditor can
	// prove what they rest on.
	Inputs []string `json:"inputs,omitempty"`
	// Positions are where the stream holds the events of Inputs, one stream sequence
	// each in the same order (0: not known), so `tribunal audit --job` reads those
	// messages instead of the stream. Empty on records written before positions were
	// kept, and on a record whose first input came without one (AddInput). They are
	// hints: the audit reads each message and checks it is the event its link names.
	Positions []uint64 `json:"positions,omitempty"`
	// DecidedBy is the id of the event the final status was derived from.
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitempty"`
	// Held are the inputs of other jobs of the batch that wait for this job's outcome: a
	// looping kind's sign-off waiting for a person (HE-2) holds the next steps of the
	// batch's other interactive views until it is answered (pkg/rulebook, Park). They are
	// applied to their own jobs once this job is final, and kept here so a release lost
	// in a crash is made again.
	Held []HeldInput `json:"held,omitempty"`
	// Reviews are people's reviews of the job (review.recorded), one per reviewer, in
	// the order they first answered.
	Reviews []Review `json:"reviews,omitempty"`

	// memo is set only between Memoize and Forget.
	memo *memo
}

// memo holds what a kind decoded from a record's Result and Loop, each with the bytes it
// was decoded from.
type memo struct {
	result, loop memoEntry
}

type memoEntry struct {
	data []byte
	v    any
}

// Memoize makes what a kind decodes from j's Result or Loop (Memo, Remember) decoded once
// until Forget: a batch's completion asks a job's kind for its outcome, its manifest
// entry, its index row and its judgments, and each decoded the result again. Decoded
// values are then shared, so only readers run in between, never a rule that changes them.
// It reports whether it began now (false: an outer Memoize lasts, and its Forget ends it).
func (j *Job) Memoize() bool {
	if j.memo != nil {
		return false
	}
	j.memo = &memo{}
	return true
}

// Forget ends Memoize, so a record held after its fold is as it was decoded.
func (j *Job) Forget() { j.memo = nil }

// entry is the memo's place for data, which must be the record's Result or Loop itself
// (the same bytes, not a copy); nil outside Memoize and for any other bytes.
func (j *Job) entry(data []byte) *memoEntry {
	switch {
	case j.memo == nil || len(data) == 0:
		return nil
	case sameBytes(data, j.Result):
		return &j.memo.result
	case sameBytes(data, j.Loop):
		return &j.memo.loop
	}
	return nil
}

// Memo returns the value Remember kept for data, nil when none was: outside Memoize, for
// bytes that are not the record's Result or Loop, and once the field holds other bytes.
func (j *Job) Memo(data []byte) any {
	if e := j.entry(data); e != nil && sameBytes(e.data, data) {
		return e.v
	}
	return nil
}

// Remember keeps v, decoded from data (the record's Result or Loop), for Memo while
// Memoize lasts.
func (j *Job) Remember(data []byte, v any) {
	if e := j.entry(data); e != nil {
		e.data, e.v = data, v
	}
}

// sameBytes reports whether a and b are the same slice of memory, not merely equal.
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// AddInput appends one link of the job's chain (Inputs) and where the stream holds its
// event (Positions, 0 when not known). Positions are kept only from a record's first
// input on, so they stay parallel to Inputs: a record written before them, or whose
// first input's position was not known, keeps none.
func (j *Job) AddInput(link string, pos uint64) {
	switch {
	case len(j.Positions) > 0 && len(j.Positions) == len(j.Inputs):
		j.Positions = append(j.Positions, pos)
	case len(j.Inputs) == 0 && pos != 0:
		j.Positions = []uint64{pos}
	}
	j.Inputs = append(j.Inputs, link)
}

// Final reports whether the job has its outcome.
func (j *Job) Final() bool { return j.Status.Final() }

// Key is the job's key in the jobs bucket.
func (j *Job) Key() string { return JobKey(j.Tenant, j.Batch, j.ACID) }

// Clone returns a deep copy, so a rule can change it while the original stays as loaded.
func (j *Job) Clone() *Job {
	data, err := json.Marshal(j)
	if err != nil {
		panic("records: a job record that does not encode: " + err.Error())
	}
	var c Job
	if err := Unmarshal(data, &c); err != nil {
		panic("records: a job record that does not decode: " + err.Error())
	}
	return &c
}

// HeldInput is one input held back on another job's record (Job.Held): the event as it
// travelled, with what the rules need to apply it later as if it had just arrived.
type HeldInput struct {
	// Job is the job the input is for.
	Job string `json:"job"`
	// Event is the input's wire form (events.Encode).
	Event []byte `json:"event"`
	// Link is the input's link of its job's digest chain, "" when it has none.
	Link string `json:"link,omitempty"`
	// ID is the event's id: an input is held once, however often it is delivered.
	ID string `json:"id"`
	// Seq and ChainSeqs are where the stream holds the event and its chain's events
	// (rulebook.Input's), so the job it is released to keeps its positions whether the
	// input waited or not: a record that kept 0 for them would point its audit nowhere
	// and differ from the replay's, which the hold's race decides.
	Seq       uint64   `json:"seq,omitempty"`
	ChainSeqs []uint64 `json:"chain_seqs,omitempty"`
}

// Call is one judge call a job's verdict came from.
type Call struct {
	// Judge is "provider/model".
	Judge string `json:"judge"`
	// Label tells a job's calls apart: an ab call's slot order ("AB", "BA"), an
	// equivalence case's id.
	Label            string            `json:"label,omitempty"`
	Status           events.VoteStatus `json:"status"`
	PromptTokens     int               `json:"prompt_tokens,omitempty"`
	CompletionTokens int               `json:"completion_tokens,omitempty"`
	LatencyMillis    int64             `json:"latency_ms,omitempty"`
	Cached           bool              `json:"cached,omitempty"`
	// Record is the stored judge.CallRecord: the prompt and the raw answer.
	Record *events.Blob `json:"record,omitempty"`
	// CachedPromptTokens, Batch, Priced, CostNanos, SavedNanos, PriceTable and
	// BudgetRefused are the verdict's (events.JudgeInfo): the call's cost, or that it had
	// no price, and why a budget refused it.
	CachedPromptTokens int    `json:"cached_prompt_tokens,omitempty"`
	Batch              bool   `json:"batch,omitempty"`
	Priced             bool   `json:"priced,omitempty"`
	CostNanos          int64  `json:"cost_nanos,omitempty"`
	SavedNanos         int64  `json:"saved_nanos,omitempty"`
	PriceTable         string `json:"price_table,omitempty"`
	BudgetRefused      string `json:"budget_refused,omitempty"`
}

// CallOf is the record of one call a verdict carries: label tells it from the verdict's
// other calls, status is its answer's.
func CallOf(label string, status events.VoteStatus, ji events.JudgeInfo) Call {
	return Call{Judge: ji.Provider + "/" + ji.Model, Label: label, Status: status, PromptTokens: ji.PromptTokens,
		CompletionTokens: ji.CompletionTokens, LatencyMillis: ji.LatencyMillis, Cached: ji.Cached, Record: ji.Call,
		CachedPromptTokens: ji.CachedPromptTokens, Batch: ji.Batch, Priced: ji.Priced, CostNanos: ji.CostNanos,
		SavedNanos: ji.SavedNanos, PriceTable: ji.PriceTable, BudgetRefused: ji.BudgetRefused}
}

// Cost is what the call cost: its money when it was priced, or one unpriced call. A
// call a budget refused, or whose input the kind refused (status blocked), was never
// made and costs nothing; a cache hit costs nothing and saved what it repeats.
func (c Call) Cost() price.Sum {
	switch {
	case c.BudgetRefused != "" || c.Status == events.VoteBlocked:
		// Never made: refused by a budget, or an input the kind refused before asking.
		return price.Sum{}
	case c.Cached:
		// Known to cost nothing, whether or not the model is priced.
		return price.Sum{Priced: 1, CacheHits: 1, Saved: price.Money(c.SavedNanos)}
	}
	s := price.Sum{Unpriced: 1}
	if c.Priced {
		s = price.Sum{Cost: price.Money(c.CostNanos), Priced: 1}
		if provider, _, _ := strings.Cut(c.Judge, "/"); price.Recorded(provider) {
			s.Recorded = 1
		}
	}
	s.PromptTokens, s.CachedPromptTokens, s.CompletionTokens = int64(c.PromptTokens), int64(c.CachedPromptTokens), int64(c.CompletionTokens)
	return s
}

// PricedCost is what the job's calls cost together, counting only the calls recorded
// with a price table: a call recorded before tribunal priced its calls carries none, and
// its cost is not known rather than unpriced. A batch's completion adds this, so a batch
// completed before costs existed re-derives with no cost, as it was recorded.
func (j *Job) PricedCost() price.Sum {
	var s price.Sum
	for _, c := range j.Calls {
		if c.PriceTable != "" {
			s.Add(c.Cost())
		}
	}
	return s
}

// Cost is what the job's calls cost together.
func (j *Job) Cost() price.Sum {
	var s price.Sum
	for _, c := range j.Calls {
		s.Add(c.Cost())
	}
	return s
}

// Batch is a batch's record in the batches bucket, keyed "<tenant>.<batch>".
type Batch struct {
	Tenant    string    `json:"tenant"`
	Batch     string    `json:"batch"`
	Size      int       `json:"size"`
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Completion is set by the aggregator whose update completed the batch, and replaced
	// when a redrive completes it again.
	Completion *Completion `json:"completion,omitempty"`
	// Redrive is the redrive in progress: its attempt and the jobs still to decide.
	Redrive *Redrive `json:"redrive,omitempty"`
	// Plan is where the batch's plan is stored (every job's id, in index order), recorded
	// from its batch.opened; nil for a batch whose client published none.
	Plan *Plan `json:"plan,omitempty"`
	// Cancel is set once the batch is cancelled: by whom, when, by which event.
	Cancel *Cancel `json:"cancel,omitempty"`
}

// Plan is what a batch header keeps of the batch's plan.
type Plan struct {
	// Digest is the plan's SHA-256 (events.BatchOpened.Digest): a resumed submission of
	// a changed batch file has another.
	Digest string `json:"digest"`
	// Pages are the plan's pages in blob storage, events.PlanPageSize jobs each.
	Pages []events.Blob `json:"pages"`
}

// Cancel records a batch's cancel.
type Cancel struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Event is the batch.cancel.requested that cancelled it.
	Event string `json:"event"`
}

// Redrive tracks one `tribunal redrive` of a batch's blocked jobs.
type Redrive struct {
	Attempt int      `json:"attempt"`
	Pending []string `json:"pending"`
}

// Completion is the outcome of a finished batch.
type Completion struct {
	At          time.Time             `json:"at"`
	By          string                `json:"by"`
	Summary     events.BatchCompleted `json:"summary"`
	ManifestRef *events.Blob          `json:"manifest,omitempty"`
	// Manifests holds every manifest of the batch by judge kind.
	Manifests map[events.Kind]events.Blob `json:"manifests,omitempty"`
	// Digest chains every event the batch's outcomes were derived from.
	Digest string `json:"digest,omitempty"`
	// Attempt is the redrive attempt this completion is for (0: the first pass).
	Attempt int `json:"attempt,omitempty"`
	// Kinds counts the batch's jobs by judge kind; Judges names every judge that
	// answered ("provider/model").
	Kinds  map[events.Kind]int `json:"kinds,omitempty"`
	Judges []string            `json:"judges,omitempty"`
	// Cost is what the batch's judge calls cost (Job.Cost over its jobs); nil for a
	// batch that made no call, and for batches completed before costs were recorded.
	Cost *price.Sum `json:"cost,omitempty"`
	// Index is the batch's index (pkg/index): one entry per job, for readers of the
	// whole batch (the console). Batches completed before it existed have none.
	Index *events.Blob `json:"index,omitempty"`
	// Revised is set when a person's review decided an outcome after the batch completed
	// (a batch whose review decides): the rules folded the batch again and replaced this
	// completion and its manifests (rulebook.Runner), so what readers of the stored
	// manifests see is what people decided. The manifests the completion announced
	// (manifest.emitted) stay the judges'; the revision is announced with manifest.emitted
	// events of its own (rulebook.RevisionEvents). nil for a completion as the batch
	// finished it.
	Revised *Revision `json:"revised,omitempty"`
	// Announced is what the completion announced when the batch finished (its
	// manifest.emitted and batch.completed), kept once reviews revised it: a redelivery
	// of the input that completed the batch announces that again, under the same ids, so
	// a first announcement whose publish failed is not lost because a review revised the
	// completion meanwhile. nil until a revision.
	Announced *Announcement `json:"announced,omitempty"`
}

// Announcement is what a completion's manifest.emitted and batch.completed events say
// (rulebook.CompletionEvents).
type Announcement struct {
	Summary   events.BatchCompleted       `json:"summary"`
	Manifests map[events.Kind]events.Blob `json:"manifests,omitempty"`
	Digest    string                      `json:"digest,omitempty"`
}

// Revision says why a completion was folded again after the batch completed. It is
// derived from the job records alone, like the rest of the completion, so the audit
// re-derives it whatever order concurrent reviews were stored in.
type Revision struct {
	// Reviews counts the batch's outcomes a person's review decided.
	Reviews int `json:"reviews" msgpack:"reviews"`
	// By is the review.recorded event behind the latest of those decisions (the latest
	// decision time, the greatest event id on a tie): the review that caused the fold.
	By string `json:"by" msgpack:"by"`
}

// JobKey is a job's key in the jobs bucket.
func JobKey(tenant, batch, ac string) string { return tenant + "." + batch + "." + ac }

// BatchPrefix matches every job key of one batch.
func BatchPrefix(tenant, batch string) string { return tenant + "." + batch + "." }

// BatchKey is a batch header's key.
func BatchKey(tenant, batch string) string { return tenant + "." + batch }

// ShardKey is the key of node k of level level of a batch's completion tree (see
// ShardJobs). Earlier versions kept contiguous shards under "s<k>" and a bitmap in the
// header; a batch in flight across that upgrade must be resubmitted (docs/operations.md).
func ShardKey(tenant, batch string, level, k int) string {
	return tenant + "." + batch + ".d" + strconv.Itoa(level) + "-" + strconv.Itoa(k)
}

// SpotcheckKey is the key that names the view of an interactive batch whose first
// sign-off waits for a person (HE-2).
func SpotcheckKey(tenant, batch string) string { return BatchKey(tenant, batch) + ".spotcheck" }

// ChainDigest folds digest-chain links into one SHA-256 chain: each step hashes the
// previous digest with the next link, so changing, dropping or reordering any event
// changes the result. Manifests and sign-offs carry it over the links they rest on.
func ChainDigest(links []string) string {
	d := ""
	for _, l := range links {
		d = ChainNext(d, l)
	}
	return d
}

// ChainNext is one step of ChainDigest: the digest of the chain prev followed by link.
func ChainNext(prev, link string) string {
	sum := sha256.Sum256([]byte(prev + "\n" + link))
	return hex.EncodeToString(sum[:])
}
