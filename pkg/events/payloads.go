package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/ident"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// Blob points at an artifact in blob storage under the envelope's tenant.
type Blob struct {
	SHA256    string `msgpack:"sha256" json:"sha256"`
	MediaType string `msgpack:"media_type" json:"media_type"`
	Size      int64  `msgpack:"size" json:"size"`
}

// Validate checks a blob reference, naming field.
func (b Blob) Validate(field string) error { return b.validate(field) }

func (b Blob) validate(field string) error {
	if !ident.HexDigest(b.SHA256) {
		return invalid(field+".sha256", fmt.Sprintf("want 64 lowercase hex characters, got %q", b.SHA256))
	}
	if b.MediaType == "" {
		return missing(field + ".media_type")
	}
	if b.Size < 0 {
		return invalid(field+".size", "negative")
	}
	return nil
}

// Source is where one input artifact of a job comes from, as the submitter named it.
// Exactly one of Blob (a local file the client uploaded) and URL is set, unless Error
// says why neither could be.
type Source struct {
	// Name is the artifact as the batch named it (path or URL), kept for the manifest.
	Name string `msgpack:"name"`
	Blob *Blob  `msgpack:"blob,omitempty"`
	URL  string `msgpack:"url,omitempty"`
	// Error records why the client could not provide the artifact (missing, unreadable,
	// outside the batch folder); the renderer turns it into a blocked render.
	Error string `msgpack:"error,omitempty"`
}

func (s Source) validate(field string) error {
	set := 0
	if s.Blob != nil {
		set++
		if err := s.Blob.validate(field + ".blob"); err != nil {
			return err
		}
	}
	if s.URL != "" {
		set++
	}
	if s.Error != "" {
		set++
	}
	if set != 1 {
		return invalid(field, "exactly one of blob, url and error must be set")
	}
	return nil
}

// Positions values of an ab job.
const (
	PositionsSingle = "single"
	PositionsSwap   = "swap"
	PositionsAuto   = "auto"
)

// AutoSwap is when `positions: auto` asks a judge for the swapped order too: when its
// first answer's confidence is below Confidence, or on every AC when its measured flip
// rate on the tenant's earlier batches cannot be shown to be at most FlipRate (the rule
// is the ab kind's, docs/judging.md explains it). A zero field takes its default.
type AutoSwap struct {
	Confidence float64 `msgpack:"confidence,omitempty"`
	FlipRate   float64 `msgpack:"flip_rate,omitempty"`
}

// Validate checks the rule's bounds, naming field; a nil rule takes the defaults.
func (a *AutoSwap) Validate(field string) error {
	if a == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"confidence", a.Confidence}, {"flip_rate", a.FlipRate}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return invalid(field+"."+f.name, fmt.Sprintf("want a number in [0,1], got %v", f.v))
		}
	}
	return nil
}

// JobSpec is what a job asks for; it travels from submission to the renderer.
type JobSpec struct {
	Kind Kind   `msgpack:"kind"`
	ACID string `msgpack:"ac_id"`
	// Criterion is the AC's text: the quality bar the judge holds both artifacts to.
	Criterion string `msgpack:"criterion,omitempty"`
	// KindPart is the kind's typed part of the spec (ab's *ab.Spec, ...), a Go value of
	// the kind's own package, which the kind registered (KindWire.Parts): it travels
	// under the kind's name ("ab"), here among the fields.
	KindPart any `msgpack:"-" json:"-"`
	// Part is the spec of a kind that registered its wire schema without typed parts:
	// the kind's own msgpack document (EncodePart), which its wire line checks.
	Part msgpack.RawMessage `msgpack:"part,omitempty" json:",omitempty"`
	// Problem, when set, is why the AC's entry cannot be judged at all ("AC-1: line 10:
	// unknown key criterian (did you mean criterion?)"): the renderer blocks the job with
	// it as it is, since no artifact is at fault.
	Problem string `msgpack:"problem,omitempty"`
	// Budget is the batch's budget ("5.00 USD", "200k tokens"; pkg/price.ParseLimit):
	// the judge makes none of the batch's calls past it. Every job of the batch carries it.
	Budget string `msgpack:"budget,omitempty" json:",omitempty"`
	// JudgeMode is how the batch asked for its judge calls to be made: "" (the
	// deployment's default), JudgeModeDirect or JudgeModeBatch (the provider's batch
	// API). It changes when an answer arrives and what it costs, never what is asked.
	JudgeMode string `msgpack:"judge_mode,omitempty" json:",omitempty"`
	// Repeats are the batch's (or AC's) trials and judge ladder; nil asks once.
	Repeats *Repeats `msgpack:"repeats,omitempty" json:",omitempty"`
	// Review is the batch's review setting and the AC's flag (people in the loop): every
	// job of a batch with one carries it, so any record says what its batch asked.
	Review *ReviewSpec `msgpack:"review,omitempty" json:",omitempty"`
}

// ReviewSpec is a batch's review setting as each of its jobs carries it (pkg/review
// reads it): a seeded sample of the batch (Share or Count, named by Seed), the ACs the
// judge was unsure of, whether a person's answer decides, and whether the team flagged
// this AC.
type ReviewSpec struct {
	Share float64 `msgpack:"share,omitempty" json:"share,omitempty"`
	Count int     `msgpack:"count,omitempty" json:"count,omitempty"`
	Seed  string  `msgpack:"seed,omitempty" json:"seed,omitempty"`
	// Name is the batch file's name, which the sample is drawn under with the seed
	// rather than the run's id, so every run of one batch file draws the same sample.
	Name    string `msgpack:"name,omitempty" json:"name,omitempty"`
	Unsure  bool   `msgpack:"unsure,omitempty" json:"unsure,omitempty"`
	Decides bool   `msgpack:"decides,omitempty" json:"decides,omitempty"`
	Flagged bool   `msgpack:"flagged,omitempty" json:"flagged,omitempty"`
}

// maxReviewSeed bounds a review seed: it is a name, not a document.
const maxReviewSeed = 128

func (r *ReviewSpec) validate() error {
	switch {
	case r.Share < 0 || r.Share > 1 || r.Share != r.Share:
		return invalid("review.share", "want a number in [0, 1]")
	case r.Count < 0:
		return invalid("review.count", "must be 0 or more")
	case r.Share > 0 && r.Count > 0:
		return invalid("review.count", "give share or count, not both")
	case len(r.Seed) > maxReviewSeed:
		return invalid("review.seed", fmt.Sprintf("at most %d bytes", maxReviewSeed))
	case len(r.Name) > maxReviewSeed:
		return invalid("review.name", fmt.Sprintf("at most %d bytes", maxReviewSeed))
	}
	return nil
}

// Judge modes of a batch (JobSpec.JudgeMode, GatesDone.JudgeMode).
const (
	// JudgeModeDirect asks the provider one call at a time (chat completions).
	JudgeModeDirect = "direct"
	// JudgeModeBatch gathers calls into the provider's batch API (OpenAI's /v1/batches).
	JudgeModeBatch = "batch"
)

// ValidJudgeMode refuses a judge mode other than "", direct and batch, naming field.
func ValidJudgeMode(field, mode string) error {
	switch mode {
	case "", JudgeModeDirect, JudgeModeBatch:
		return nil
	}
	return invalid(field, fmt.Sprintf("want direct or batch, got %q", mode))
}

func (s JobSpec) validate() error {
	if s.ACID == "" {
		return missing("ac_id")
	}
	if s.Budget != "" {
		if _, err := price.ParseLimit(s.Budget); err != nil {
			return invalid("budget", err.Error())
		}
	}
	if err := ValidJudgeMode("judge_mode", s.JudgeMode); err != nil {
		return err
	}
	if err := s.Repeats.Validate("repeats"); err != nil {
		return err
	}
	if s.Review != nil {
		if err := s.Review.validate(); err != nil {
			return err
		}
	}
	w, err := wireOf(s.Kind)
	if err != nil {
		return err
	}
	return w.spec(s)
}

// JobSubmitted records one job of a batch. The aggregator keeps it as the job record;
// BatchSize lets it tell when the batch is complete.
type JobSubmitted struct {
	Spec JobSpec `msgpack:"spec"`
	// Index is the job's position in its batch, 0-based.
	Index     int `msgpack:"index"`
	BatchSize int `msgpack:"batch_size"`
	// Source is the batch file the job came from, for the manifest.
	BatchSource string `msgpack:"batch_source,omitempty"`
}

// EventType implements Payload.
func (*JobSubmitted) EventType() Type { return TypeJobSubmitted }

// Validate implements Payload.
func (p *JobSubmitted) Validate() error {
	if err := p.Spec.validate(); err != nil {
		return err
	}
	if err := checkSize("batch_size", p.BatchSize); err != nil {
		return err
	}
	if p.Index < 0 || p.Index >= p.BatchSize {
		return invalid("index", fmt.Sprintf("want 0 <= index < %d, got %d", p.BatchSize, p.Index))
	}
	return nil
}

// RenderRequested asks the renderer to produce the job's artifacts for one iteration.
type RenderRequested struct {
	Spec JobSpec `msgpack:"spec"`
}

// EventType implements Payload.
func (*RenderRequested) EventType() Type { return TypeRenderRequested }

// Validate implements Payload.
func (p *RenderRequested) Validate() error { return p.Spec.validate() }

// Artifact is one rendered artifact, ready for gates.
type Artifact struct {
	Blob Blob `msgpack:"blob"`
	// Class is how a judge ingests it: "image", "text" or "html".
	Class string `msgpack:"class"`
}

// Validate checks an artifact, naming field.
func (a Artifact) Validate(field string) error { return a.validate(field) }

func (a Artifact) validate(field string) error {
	if err := a.Blob.validate(field + ".blob"); err != nil {
		return err
	}
	switch a.Class {
	case "image", "text", "html":
		return nil
	case "":
		return missing(field + ".class")
	default:
		return invalid(field+".class", fmt.Sprintf("want image, text or html, got %q", a.Class))
	}
}

// RenderDone carries what the renderer produced, or why it could not.
type RenderDone struct {
	Spec JobSpec `msgpack:"spec"`
	// Blocked is the reason the job cannot be judged (missing, unreadable, unsupported
	// or diff artifact); empty when the render succeeded.
	Blocked string `msgpack:"blocked,omitempty"`
	// Artifacts by role ("ours", "reference"; "output" for critic). Roles stop at the
	// gater.
	Artifacts map[string]Artifact `msgpack:"artifacts,omitempty"`
	// Transcripts are an equivalence job's runner transcripts, two per case.
	Transcripts []Transcript `msgpack:"transcripts,omitempty"`
	// RenderError is a rubric view the sensor could not render (the build broke, the
	// page failed): a failed gate for the loop, not a blocked job.
	RenderError string `msgpack:"render_error,omitempty"`
	// ChargeRuns asks that the transcripts' runner usage be carried on through gates.done
	// to the verdict (GatesDone.Runs), where the job's cost is derived. A render.done
	// recorded before it says nothing, so its gates.done re-derives, as recorded, with none.
	ChargeRuns bool `msgpack:"charge_runs,omitempty" json:",omitempty"`
}

// EventType implements Payload.
func (*RenderDone) EventType() Type { return TypeRenderDone }

// Validate implements Payload.
func (p *RenderDone) Validate() error {
	if err := p.Spec.validate(); err != nil {
		return err
	}
	if p.Blocked != "" {
		return nil
	}
	if len(p.Artifacts) == 0 && len(p.Transcripts) == 0 && p.RenderError == "" {
		return missing("artifacts")
	}
	for role, a := range p.Artifacts {
		if err := a.validate("artifacts." + role); err != nil {
			return err
		}
	}
	return nil
}

// Gate is one deterministic check's outcome.
type Gate struct {
	Name   string     `msgpack:"name"`
	Status GateStatus `msgpack:"status"`
	Detail string     `msgpack:"detail,omitempty"`
}

// Slot is one blinded artifact position shown to a judge.
type Slot struct {
	// Name is "A" or "B".
	Name     string   `msgpack:"name"`
	Artifact Artifact `msgpack:"artifact"`
}

// GatesDone is the judge-facing event: every gate passed and the artifacts sit in
// blinded slots. It carries no role label, no path and no diff by construction: the
// only free text is the AC's criterion.
type GatesDone struct {
	Kind      Kind     `msgpack:"kind"`
	Criterion string   `msgpack:"criterion,omitempty"`
	Gates     []Gate   `msgpack:"gates"`
	Slots     []Slot   `msgpack:"slots"`
	Positions string   `msgpack:"positions,omitempty"`
	Judges    []string `msgpack:"judges,omitempty"`
	// AutoSwap is an ab job's rule for positions "auto".
	AutoSwap *AutoSwap `msgpack:"auto_swap,omitempty"`
	// Cases are the transcript pairs of an equivalence job.
	Cases []CasePair `msgpack:"cases,omitempty"`
	// KindPart is the kind's typed judge-facing part (JobSpec.KindPart): a rubric job's
	// view context, whose slots are render, reference, previous (optional), probe,
	// tokens, spec_text, spec_json, gate_result and rubric.
	KindPart any `msgpack:"-" json:"-"`
	// Part is the judge-facing part of a registered kind's job (JobSpec.Part). Like every
	// field here it must carry nothing that tells the judge a role, a path or a diff.
	Part msgpack.RawMessage `msgpack:"part,omitempty" json:",omitempty"`
	// Budget is the batch's budget (JobSpec.Budget), which the gater passes on to the
	// judge: it tells the judge nothing about the artifacts.
	Budget string `msgpack:"budget,omitempty" json:",omitempty"`
	// JudgeMode is the job's JobSpec.JudgeMode, carried to the judge service, which
	// decides from it and its deployment's policy whether the calls go direct or through
	// the provider's batch API.
	JudgeMode string `msgpack:"judge_mode,omitempty" json:",omitempty"`
	// Repeats is the job's JobSpec.Repeats, carried to the judge like the budget.
	Repeats *Repeats `msgpack:"repeats,omitempty" json:",omitempty"`
	// Runs are an equivalence job's runner calls as render.done recorded them, which the
	// judge passes on to its verdict untouched (never to the model): the aggregator reads
	// verdicts, not render.done, and charges them to the AC's cost. Usage only, no blob.
	Runs []RunnerRun `msgpack:"runs,omitempty" json:",omitempty"`
}

// EventType implements Payload.
func (*GatesDone) EventType() Type { return TypeGatesDone }

// Validate implements Payload.
func (p *GatesDone) Validate() error {
	w, err := wireOf(p.Kind)
	if err != nil {
		return err
	}
	if err := ValidJudgeMode("judge_mode", p.JudgeMode); err != nil {
		return err
	}
	if err := p.Repeats.Validate("repeats"); err != nil {
		return err
	}
	if err := w.gates(p); err != nil {
		return err
	}
	for i, s := range p.Slots {
		if err := s.Artifact.validate(fmt.Sprintf("slots[%d].artifact", i)); err != nil {
			return err
		}
	}
	for i, g := range p.Gates {
		if g.Status.Failed() {
			return invalid(fmt.Sprintf("gates[%d]", i), "a failed gate never reaches a judge")
		}
	}
	return nil
}

// GatesFailed reports a job that cannot go to a judge: a gate failed or the render was
// blocked. Only the aggregator reads it, so it may name roles and reasons.
type GatesFailed struct {
	Kind  Kind   `msgpack:"kind"`
	ACID  string `msgpack:"ac_id"`
	Gates []Gate `msgpack:"gates,omitempty"`
	// Blocked is set when the job is blocked rather than red (nothing to gate).
	Blocked string `msgpack:"blocked,omitempty"`
	// NeedsContext is set for a rubric view whose canonical reference awaits a human
	// (HE-1); Candidate is the render offered as that reference.
	NeedsContext string `msgpack:"needs_context,omitempty"`
	Candidate    *Blob  `msgpack:"candidate,omitempty"`
	// GateResult is a rubric view's gate-result.json (the seed's shape) in blob storage,
	// when the gates ran to a result.
	GateResult *Blob `msgpack:"gate_result,omitempty"`
}

// EventType implements Payload.
func (*GatesFailed) EventType() Type { return TypeGatesFailed }

// Validate implements Payload.
func (p *GatesFailed) Validate() error {
	if p.Kind == "" {
		return missing("kind")
	}
	if p.ACID == "" {
		return missing("ac_id")
	}
	if p.Blocked == "" && p.NeedsContext == "" && len(p.Gates) == 0 {
		return missing("gates")
	}
	if p.GateResult != nil {
		return p.GateResult.validate("gate_result")
	}
	return nil
}

// JudgeInfo says which judge produced an answer and at what cost, for every verdict.
type JudgeInfo struct {
	Provider   string `msgpack:"provider"`
	Model      string `msgpack:"model"`
	Instance   string `msgpack:"instance,omitempty"`
	PromptHash string `msgpack:"prompt_hash,omitempty"`
	// PromptTokens and CompletionTokens are the provider's usage report.
	PromptTokens     int   `msgpack:"prompt_tokens,omitempty"`
	CompletionTokens int   `msgpack:"completion_tokens,omitempty"`
	LatencyMillis    int64 `msgpack:"latency_ms,omitempty"`
	// Cached is true when the answer came from the judge-call cache, not a new call.
	Cached bool `msgpack:"cached,omitempty"`
	// Sampling is how the answer was sampled, as the provider sent the call (a cached
	// answer keeps the original call's); nil on verdicts recorded before it existed.
	Sampling *Sampling `msgpack:"sampling,omitempty"`
	// Call is the stored record of what the call sent and received (judge.CallRecord),
	// for reviewers: the prompt itself never travels in an event.
	Call *Blob `msgpack:"call,omitempty"`
	// CachedPromptTokens are the prompt tokens the provider served from its own prompt
	// cache (part of PromptTokens, billed at the cached-input price).
	CachedPromptTokens int `msgpack:"cached_prompt_tokens,omitempty" json:",omitempty"`
	// Batch marks an answer obtained through the provider's batch API (`--judge-mode
	// batch`), priced with the provider's batch discount.
	Batch bool `msgpack:"batch,omitempty" json:",omitempty"`
	// Priced says CostNanos is known: every call the answer took was priced by the price
	// table named PriceTable. A call of a model with no price is unpriced, never free.
	Priced bool `msgpack:"priced,omitempty" json:",omitempty"`
	// CostNanos is what the answer cost, in nano-dollars (pkg/price), the repair re-ask
	// included; 0 for a cache hit, which made no call.
	CostNanos int64 `msgpack:"cost_nanos,omitempty" json:",omitempty"`
	// SavedNanos is, for a cache hit, what the answer cost when it was first asked.
	SavedNanos int64 `msgpack:"saved_nanos,omitempty" json:",omitempty"`
	// PriceTable is the version of the price table the cost was computed with.
	PriceTable string `msgpack:"price_table,omitempty" json:",omitempty"`
	// BudgetRefused says why a budget refused the call, which was therefore never made
	// ("budget exhausted: ..."); the rules block the job with it.
	BudgetRefused string `msgpack:"budget_refused,omitempty" json:",omitempty"`
}

// FromCache marks an answer served from the judge-call cache by instance: it cost
// nothing now, and saved what it cost when it was asked.
func (j *JudgeInfo) FromCache(instance string) {
	j.Cached, j.Instance = true, instance
	if j.CostNanos > 0 {
		j.SavedNanos, j.CostNanos = j.CostNanos, 0
	}
}

// Response formats a provider asked for, as Sampling records them.
const (
	FormatJSONSchema = "json_schema"
	FormatJSONObject = "json_object"
	FormatNone       = "none"
)

// Sampling is how one judge call was sampled: what the provider actually sent (after any
// fallback) and the model id the server reported. It is what makes a verdict
// reproducible, or says why it may not be.
type Sampling struct {
	// Temperature is the sampling temperature sent; nil means none was pinned (the
	// server's default applied), which Pinned reports.
	Temperature *float32 `msgpack:"temperature,omitempty" json:"temperature,omitempty"`
	// Seed is the sampling seed sent, nil for none.
	Seed *int `msgpack:"seed,omitempty" json:"seed,omitempty"`
	// MaxTokens is the answer token limit sent (max_tokens, or max_completion_tokens to a
	// reasoning model); 0 means none was sent.
	MaxTokens int `msgpack:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	// ResponseFormat is FormatJSONSchema, FormatJSONObject or FormatNone: what the call
	// that answered asked for, after the provider's fallbacks.
	ResponseFormat string `msgpack:"response_format,omitempty" json:"response_format,omitempty"`
	// ReportedModel is the model id the provider's server reported answering with (a
	// dated snapshot such as "gpt-4o-2024-08-06" for "gpt-4o"); "" when it reported none.
	ReportedModel string `msgpack:"reported_model,omitempty" json:"reported_model,omitempty"`
}

// Pinned reports whether the call pinned its temperature. A nil Sampling (a verdict
// recorded before sampling was) is not known to be pinned.
func (s *Sampling) Pinned() bool { return s != nil && s.Temperature != nil }

// String is the sampling in one line: "temperature 0, seed 7, max tokens 4096,
// json_schema, reported gpt-4o-2024-08-06"; an unpinned temperature says so.
func (s *Sampling) String() string {
	if s == nil {
		return "sampling not recorded"
	}
	parts := []string{"temperature not pinned"}
	if s.Temperature != nil {
		parts[0] = "temperature " + strconv.FormatFloat(float64(*s.Temperature), 'g', -1, 32)
	}
	if s.Seed != nil {
		parts = append(parts, "seed "+strconv.Itoa(*s.Seed))
	}
	if s.MaxTokens > 0 {
		parts = append(parts, "max tokens "+strconv.Itoa(s.MaxTokens))
	} else {
		parts = append(parts, "no max tokens")
	}
	if s.ResponseFormat != "" {
		parts = append(parts, s.ResponseFormat)
	}
	if s.ReportedModel != "" {
		parts = append(parts, "reported "+s.ReportedModel)
	}
	return strings.Join(parts, ", ")
}

// Vote is one judge call's answer over the slots as that call saw them.
type Vote struct {
	Judge JudgeInfo `msgpack:"judge"`
	// Order is "AB" when the call saw the slots as published, "BA" when swapped.
	Order      string     `msgpack:"order"`
	Status     VoteStatus `msgpack:"status"`
	Error      string     `msgpack:"error,omitempty"`
	RawWinner  string     `msgpack:"raw_winner,omitempty"`
	Confidence float64    `msgpack:"confidence"`
	BiggestGap string     `msgpack:"biggest_gap,omitempty"`
	// Reasoning is the judge's short per-dimension comparison, kept beside BiggestGap
	// for a reader; nothing is derived from it.
	Reasoning string `msgpack:"reasoning,omitempty"`
	// Raw is the model's answer text as received, kept for audit when it was invalid.
	Raw string `msgpack:"raw,omitempty"`
	// Trial is which of the job's repeated trials the call was (0 the first), and Rung
	// which rung of its judge ladder asked it (0 the first).
	Trial int `msgpack:"trial,omitempty" json:",omitempty"`
	Rung  int `msgpack:"rung,omitempty" json:",omitempty"`
}

// VerdictEmitted is the judge's answer for one job iteration: every call it made, in
// slot terms only. The aggregator un-shuffles and derives everything else.
type VerdictEmitted struct {
	Kind  Kind   `msgpack:"kind"`
	Votes []Vote `msgpack:"votes,omitempty"`
	// Cases are the per-case answers of an equivalence job.
	Cases []CaseVote `msgpack:"cases,omitempty"`
	// KindPart is the kind's typed answer (JobSpec.KindPart): a critic's or a rubric
	// judge's. It is written after Cases, where those kinds' fields were: a verdict has
	// one of them only, so its bytes are as they were.
	KindPart any `msgpack:"-" json:"-"`
	// KindTrials are the kind's answers of its later trials (2 to k), when it was judged
	// with trials and its trials are not votes (critic's []critic.Vote, written as
	// "critic_trials"; events.Parts.VerdictTrials).
	KindTrials any `msgpack:"-" json:"-"`
	// Part is the answer of a registered kind's job (JobSpec.Part).
	Part msgpack.RawMessage `msgpack:"part,omitempty" json:",omitempty"`
	// Runs are the equivalence runner's calls the job's transcripts came from
	// (GatesDone.Runs), carried so that the job's cost includes them; none on a verdict
	// recorded before they were carried.
	Runs []RunnerRun `msgpack:"runs,omitempty" json:",omitempty"`
}

// EventType implements Payload.
func (*VerdictEmitted) EventType() Type { return TypeVerdictEmitted }

// Validate implements Payload.
func (p *VerdictEmitted) Validate() error {
	w, err := wireOf(p.Kind)
	if err != nil {
		return err
	}
	return w.verdict(p)
}

// ValidStatus refuses a vote status other than the four, naming field.
func ValidStatus(field string, s VoteStatus) error {
	switch s {
	case VoteOK, VoteSchemaViolation, VoteUnavailable, VoteBlocked:
		return nil
	}
	return invalid(field, fmt.Sprintf("want ok, schema_violation, unavailable or blocked, got %q", s))
}

// IterationDecided is the aggregator's decision for one job iteration. For `ab` it is
// final: the un-shuffled comparison and its routing.
type IterationDecided struct {
	Kind   Kind   `msgpack:"kind"`
	ACID   string `msgpack:"ac_id"`
	Status Status `msgpack:"status"`
	Final  bool   `msgpack:"final"`
	// KindPart is the kind's typed decision (JobSpec.KindPart).
	KindPart any `msgpack:"-" json:"-"`
	// Judges names every judge that contributed, "provider/model".
	Judges []string `msgpack:"judges,omitempty"`
	// Disagreements counts self-reported aggregates the aggregator had to correct.
	Disagreements int `msgpack:"disagreements,omitempty"`
	// Trials is how repeated trials were reduced to this decision; Ladder which rung of
	// a judge ladder decided it. Both are nil for a job asked once by one judge.
	Trials *TrialsResult `msgpack:"trials,omitempty" json:",omitempty"`
	Ladder *LadderResult `msgpack:"ladder,omitempty" json:",omitempty"`
}

// EventType implements Payload.
func (*IterationDecided) EventType() Type { return TypeIterationDecided }

// Validate implements Payload.
func (p *IterationDecided) Validate() error {
	if p.Kind == "" {
		return missing("kind")
	}
	if p.ACID == "" {
		return missing("ac_id")
	}
	if p.Status == "" {
		return missing("status")
	}
	return nil
}

// SignoffRecorded is a view's sign-off after its required consecutive passes.
type SignoffRecorded struct {
	Feature          string `msgpack:"feature"`
	Target           string `msgpack:"target"`
	State            string `msgpack:"state"`
	Appearance       string `msgpack:"appearance"`
	SignedOffAt      string `msgpack:"signed_off_at"`
	Iterations       int    `msgpack:"iterations"`
	ReferenceSource  string `msgpack:"reference_source"`
	SnapshotBaseline *Blob  `msgpack:"snapshot_baseline,omitempty"`
	HumanSpotcheck   string `msgpack:"human_spotcheck"`
	// FinalVerdict is the last judged verdict, normalized, as JSON.
	FinalVerdict string `msgpack:"final_verdict,omitempty"`
	// Digest chains the events this sign-off was derived from.
	Digest string `msgpack:"digest,omitempty"`
}

// EventType implements Payload.
func (*SignoffRecorded) EventType() Type { return TypeSignoffRecorded }

// Validate implements Payload.
func (p *SignoffRecorded) Validate() error {
	for f, v := range map[string]string{"feature": p.Feature, "target": p.Target, "state": p.State, "appearance": p.Appearance, "human_spotcheck": p.HumanSpotcheck} {
		if v == "" {
			return missing(f)
		}
	}
	return nil
}

// ManifestEmitted announces a manifest stored in blob storage.
type ManifestEmitted struct {
	Kind     Kind `msgpack:"kind"`
	Manifest Blob `msgpack:"manifest"`
	ExitCode int  `msgpack:"exit_code"`
	// Digest chains the events the manifest was derived from.
	Digest string `msgpack:"digest,omitempty"`
	// RevisedBy is set on a manifest announced again because people's reviews revised a
	// completed batch (rulebook.Runner): the review.recorded behind the latest outcome a
	// person decided. Reviews counts the outcomes people decided. The announcement made
	// at completion, without them, stays the judges'.
	RevisedBy string `msgpack:"revised_by,omitempty"`
	Reviews   int    `msgpack:"reviews,omitempty"`
}

// EventType implements Payload.
func (*ManifestEmitted) EventType() Type { return TypeManifestEmitted }

// Step is the id step of a manifest's announcement: its kind for the one made at
// completion; for one made because reviews revised the completion (RevisedBy), a hash of
// everything it says, so the same revision derived again (a redelivered review, a second
// aggregator folding the same records) has the same id and the stream drops the copy,
// while another revision has an id of its own, and an announcement whose contents were
// altered no longer carries the id of its step.
func (p *ManifestEmitted) Step() string {
	if p.RevisedBy == "" {
		return string(p.Kind)
	}
	h := sha256.New()
	for _, part := range []string{string(p.Kind), p.Manifest.SHA256, p.Manifest.MediaType, strconv.FormatInt(p.Manifest.Size, 10),
		strconv.Itoa(p.ExitCode), p.Digest, p.RevisedBy, strconv.Itoa(p.Reviews)} {
		h.Write([]byte(part))
		h.Write([]byte{0x1f})
	}
	return string(p.Kind) + "-revised-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// Validate implements Payload.
func (p *ManifestEmitted) Validate() error {
	if p.Kind == "" {
		return missing("kind")
	}
	return p.Manifest.validate("manifest")
}

// JobBlocked records a job that could not be judged and why. Blocked is never success.
type JobBlocked struct {
	Kind Kind   `msgpack:"kind"`
	ACID string `msgpack:"ac_id"`
	// Stage is where it stopped: "submit", "render", "gate", "judge" or "cancel".
	Stage  string `msgpack:"stage"`
	Reason string `msgpack:"reason"`
}

// EventType implements Payload.
func (*JobBlocked) EventType() Type { return TypeJobBlocked }

// Validate implements Payload.
func (p *JobBlocked) Validate() error {
	if p.ACID == "" {
		return missing("ac_id")
	}
	if p.Reason == "" {
		return missing("reason")
	}
	return nil
}

// BatchCompleted is published once when every job of a batch has a final outcome.
// Its JSON keys (results.json's summary, `--json` outputs, the batch record in the
// batches bucket) are the same snake_case names as its msgpack ones.
type BatchCompleted struct {
	Total       int `msgpack:"total" json:"total"`
	Compared    int `msgpack:"compared" json:"compared"`
	Blocked     int `msgpack:"blocked" json:"blocked"`
	Violations  int `msgpack:"violations" json:"violations"`
	Suggestions int `msgpack:"suggestions" json:"suggestions"`
	ExitCode    int `msgpack:"exit_code" json:"exit_code"`
	// Manifests lists the manifests emitted for the batch, one per judge kind.
	Manifests []Blob `msgpack:"manifests,omitempty" json:"manifests,omitempty"`
	// ReviewsFolded counts the people's answers (review.recorded) the completion's fold
	// found applied to its jobs, and ReviewSeqs are where the stream holds the latest
	// MaxReviewSeqs of them (ascending; those of unknown position are counted, never
	// listed). A review and the batch's last verdict handled at once are folded in or
	// not whatever order the stream holds them in, so the completion says which it
	// folded: the audit re-derives it with those (docs/architecture.md, "The audit").
	// Absent on completions that folded no review.
	ReviewsFolded int      `msgpack:"reviews_folded,omitempty" json:"reviews_folded,omitempty"`
	ReviewSeqs    []uint64 `msgpack:"review_seqs,omitempty" json:"review_seqs,omitempty"`
}

// MaxReviewSeqs bounds BatchCompleted.ReviewSeqs: the answers a race can reorder are the
// few in flight around the last verdict, and a completion stays one small event however
// many answers it folded.
const MaxReviewSeqs = 64

// UnmarshalJSON reads the snake_case keys and, for batch records stored before they
// had JSON names, the Go field names: "Total" and the other one-word names match
// their snake_case keys case-insensitively, but "ExitCode" does not match "exit_code".
func (p *BatchCompleted) UnmarshalJSON(data []byte) error {
	type plain BatchCompleted
	var v struct {
		plain
		LegacyExitCode *int `json:"ExitCode"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*p = BatchCompleted(v.plain)
	if v.LegacyExitCode != nil {
		p.ExitCode = *v.LegacyExitCode
	}
	return nil
}

// EventType implements Payload.
func (*BatchCompleted) EventType() Type { return TypeBatchCompleted }

// Validate implements Payload.
func (p *BatchCompleted) Validate() error {
	if p.Total <= 0 {
		return invalid("total", "must be positive")
	}
	if len(p.ReviewSeqs) > MaxReviewSeqs {
		return invalid("review_seqs", fmt.Sprintf("%d positions, at most %d", len(p.ReviewSeqs), MaxReviewSeqs))
	}
	if p.ReviewsFolded < len(p.ReviewSeqs) {
		return invalid("reviews_folded", fmt.Sprintf("%d, fewer than the %d positions of review_seqs", p.ReviewsFolded, len(p.ReviewSeqs)))
	}
	for i, s := range p.ReviewSeqs {
		if s == 0 || i > 0 && s <= p.ReviewSeqs[i-1] {
			return invalid("review_seqs", "stream positions, positive and ascending")
		}
	}
	return nil
}

// newPayload returns an empty payload for t.
func newPayload(t Type) (Payload, error) {
	switch t {
	case TypeJobSubmitted:
		return &JobSubmitted{}, nil
	case TypeRenderRequested:
		return &RenderRequested{}, nil
	case TypeRenderDone:
		return &RenderDone{}, nil
	case TypeGatesDone:
		return &GatesDone{}, nil
	case TypeGatesFailed:
		return &GatesFailed{}, nil
	case TypeVerdictEmitted:
		return &VerdictEmitted{}, nil
	case TypeIterationDecided:
		return &IterationDecided{}, nil
	case TypeSignoffRecorded:
		return &SignoffRecorded{}, nil
	case TypeManifestEmitted:
		return &ManifestEmitted{}, nil
	case TypeJobBlocked:
		return &JobBlocked{}, nil
	case TypeBatchCompleted:
		return &BatchCompleted{}, nil
	case TypeRenderUnchanged:
		return &RenderUnchanged{}, nil
	case TypeSpotcheckRecorded:
		return &SpotcheckRecorded{}, nil
	case TypeViewReset:
		return &ViewReset{}, nil
	case TypeBatchOpened:
		return &BatchOpened{}, nil
	case TypeBatchCancelRequested:
		return &BatchCancelRequested{}, nil
	case TypeJobCancelRequested:
		return &JobCancelRequested{}, nil
	case TypeReviewRecorded:
		return &ReviewRecorded{}, nil
	}
	return nil, &FieldError{Doc: docEvent, Field: "envelope.type", Reason: fmt.Sprintf("%q", t), Err: ErrUnknownType}
}
