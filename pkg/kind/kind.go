// Package kind defines what a judge kind's rules are: the small set of pure decisions
// that differ between kinds (how an answer becomes an outcome, a manifest, a row). Each
// kind lives in one folder below this one (pkg/kind/ab, critic, equivalence, rubric): its
// rules in the folder's own package, which implements Kind and does no I/O, and its
// stages in <folder>/stages (pkg/kind/stage). The registry in pkg/registry maps kind names to
// them. The client, the services, the rules (pkg/rulebook) and the readers of results
// dispatch through the registry and never switch on a kind.
//
// docs/adding-a-kind.md walks through adding one.
package kind

import (
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// Kind is one judge kind's rules: the part of the aggregator's decisions and of the
// readers' reports that differs between kinds. Every method is pure (no I/O): Decide,
// Blocked, Outcome and Manifest are the kind's part of the rules (pkg/rulebook), Row is
// how readers show a job and Estimate what `tribunal validate` says it will cost. The
// kind's stages (plan, render, gate, judge) live beside its rules, in its folder, and
// implement stage.Stages.
type Kind interface {
	// Name is the kind's wire name.
	Name() events.Kind
	// Decide derives a pending job's outcome from its judge's answer (never trusting what
	// the judge claimed beyond its raw answer), or, for a looping kind, applies one loop
	// event. It changes st.Job (and st.State) and may add events to publish.
	Decide(st *Step) error
	// Blocked records the kind's result of a job that ended blocked before a judge
	// answered (a blocked render, a red gate, a dead letter, a cancel).
	Blocked(j *records.Job)
	// Outcome classifies a final job for the batch's exit code.
	Outcome(j *records.Job) Outcome
	// Manifest starts the kind's manifest of one batch.
	Manifest(tenant, batch string) Manifest
	// Row is a job as people read it in results and the console.
	Row(j *records.Job) Row
	// Estimate is what a planned job will ask of the services, for `tribunal validate`.
	Estimate(spec events.JobSpec) Estimate
}

// Estimate is what one job will ask of the services: the artifacts the renderer will
// take in and the model calls it will make, before cache hits, repair re-asks and
// retries.
type Estimate struct {
	// Sources are the artifacts the renderer ingests, by role.
	Sources []Source
	// JudgeCalls is what the job costs at least; MaxJudgeCalls what a loop may spend up
	// to its budget.
	JudgeCalls, MaxJudgeCalls int
	// RunnerCalls are equivalence runs of a document on a case, made with RunnerModel
	// (empty: the judge service's model).
	RunnerCalls int
	RunnerModel string
	// Judges are a panel's models; empty means the judge service's model. With a ladder,
	// Judges is its first rung: what JudgeCalls are priced at.
	Judges []string
	// Ladder is a judge ladder's rungs, first to last: MaxJudgeCalls asks every rung,
	// each an even share, priced at the rung's own model.
	Ladder    []string
	Positions string
	// Cases is a transfer set's size.
	Cases int
	// Blocked is why the job will not be judged whatever its artifacts say.
	Blocked string
}

// Source is one artifact a job ingests. Document marks an equivalence document, which
// only needs to be text.
type Source struct {
	Role     string
	Src      events.Source
	Document bool
}

// Step is one input of the aggregator's rules for a pending job of the kind, with the
// state it reads. Decide changes Job (and State) in place and appends to Publish.
type Step struct {
	// Event is the input: a verdict, or for a looping kind also red gates, an unchanged
	// render or a person's answer.
	Event events.Event
	// Link is the input's link of the job's digest chain.
	Link string
	Now  time.Time
	// Job is the job's record; Decide makes it final or records a loop step.
	Job *records.Job
	// State is a looping kind's own state of the job (Looping.LoadState), a copy Decide
	// may change; nil for other kinds and for a job with no state.
	State State
	// Claim is the job holding the batch's claim (Looping.Claiming), "" when none does
	// yet.
	Claim string

	// Publish are events the step announces besides the job's final outcome (which the
	// rules derive from the record).
	Publish []events.Event
	// StateChanged says State must be stored.
	StateChanged bool
	// WantsClaim asks the caller to claim the batch's claim for this job and decide again
	// with Claim set.
	WantsClaim bool
	// Replayed says the job applied this input before: it stays as it is, and Publish
	// holds what the step announced then.
	Replayed bool
}

// Manifest folds a batch's final jobs of one kind into the kind's manifest.
type Manifest interface {
	// Add folds one final job in. The record may be reused by the caller afterwards.
	Add(j *records.Job)
	// Build returns the manifest generated at at (nil when no job was added).
	Build(at time.Time) any
}

// Row is one job as people read it: results.json, the results table, the console.
type Row struct {
	ACID            string   `json:"ac_id"`
	Kind            string   `json:"kind"`
	Status          string   `json:"status"`
	Winner          string   `json:"winner,omitempty"`
	Confidence      *float64 `json:"confidence,omitempty"`
	Tag             string   `json:"tag,omitempty"`
	Impact          string   `json:"impact,omitempty"`
	LabelAssignment string   `json:"label_assignment,omitempty"`
	RawWinner       string   `json:"raw_winner,omitempty"`
	BiggestGap      string   `json:"biggest_gap,omitempty"`
	Agreement       string   `json:"agreement,omitempty"`
	// Consistent says whether a position-swapped pair agreed once un-shuffled (nil
	// without a swap).
	Consistent *bool `json:"consistent,omitempty"`
	// Slots says which artifact each blind slot was ("slot A was ours, slot B the
	// reference"), for the judge's words about slots in BiggestGap.
	Slots string `json:"slots,omitempty"`
	// Verdict is the kind's own verdict: pass, revise or reject for critic; pass or fail
	// for equivalence; the loop outcome for rubric.
	Verdict string `json:"verdict,omitempty"`
	// Quality is the critic's derived quality.
	Quality *int `json:"quality,omitempty"`
	// Detail summarises an equivalence report, a critic rationale or a view's loop.
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Judge names who produced the verdict ("scripted/fixed-A", "openai/gpt-4o", ...).
	Judge  string `json:"judge,omitempty"`
	Cached bool   `json:"cached,omitempty"`
	// Sampling is how the verdict's calls were sampled: one entry per judge and distinct
	// setting, in call order (AddSampling).
	Sampling []JudgeSampling `json:"sampling,omitempty"`
	// Unpinned marks a verdict with a call that pinned no temperature: judged again, it
	// may come out differently for no reason in the artifacts.
	Unpinned bool `json:"temperature_unpinned,omitempty"`
	// Cost is what the job's judge calls cost (records.Job.Cost), nil for a job that
	// made none.
	Cost *price.Sum `json:"cost,omitempty"`
	// Trials are the job's repeated trials: every answer, the reducer and the agreement;
	// Ladder which rung of a judge ladder decided and why. Unsure says why the verdict was
	// unsure (trials.Unsure), for a person to look at.
	Trials *events.TrialsResult `json:"trials,omitempty"`
	Ladder *events.LadderResult `json:"ladder,omitempty"`
	Unsure []string             `json:"unsure,omitempty"`
}

// JudgeSampling is how one judge's calls of a verdict were sampled.
type JudgeSampling struct {
	Judge string `json:"judge"`
	events.Sampling
}

// String is the judge and its sampling in one line.
func (s JudgeSampling) String() string { return s.Judge + ": " + s.Sampling.String() }

// AddSampling records on the row how one call of its verdict was sampled, once per judge
// and setting, and marks the row unpinned when the call pinned no temperature. A call
// that recorded no sampling (made before verdicts recorded it, or never answered) adds
// nothing.
func (r *Row) AddSampling(j events.JudgeInfo) {
	if j.Sampling == nil {
		return
	}
	s := JudgeSampling{Judge: JudgeName(j), Sampling: *j.Sampling}
	r.Unpinned = r.Unpinned || !j.Sampling.Pinned()
	for _, have := range r.Sampling {
		if have.String() == s.String() {
			return
		}
	}
	r.Sampling = append(r.Sampling, s)
}

// JudgeName is how a judge is named in decisions and results: "provider/model".
func JudgeName(j events.JudgeInfo) string { return j.Provider + "/" + j.Model }

// AddJudge appends a judge name unless it is there already.
func AddJudge(js []string, j string) []string {
	if j == "" {
		return js
	}
	for _, x := range js {
		if x == j {
			return js
		}
	}
	return append(js, j)
}

// ErrRefused marks an input the rules will never apply: it contradicts where it came from,
// what its job is or what its view is judged with. Retrying cannot change that, so callers
// drop it and count it (rulebook.ErrRefused is this error).
var ErrRefused = errclass.New(errclass.Refused, "input refused")

// ErrNotForKind marks an input a kind cannot take: a verdict of another kind, a spec
// without the kind's part. Retrying cannot fix it.
var ErrNotForKind = errclass.New(errclass.Refused, "not an input of this judge kind")

// BaseRow is the part of a row every kind shares.
func BaseRow(j *records.Job) Row {
	r := Row{ACID: j.ACID, Kind: string(j.Spec.Kind), Status: string(j.Status), Reason: j.BlockReason, Judge: strings.Join(j.Judges, ",")}
	if d := j.Decided; d != nil {
		r.Trials, r.Ladder, r.Unsure = d.Trials, d.Ladder, trials.Unsure(d)
	}
	return r
}

// Looping is a kind whose jobs loop: a job keeps a state of the kind's own across its
// inputs, iterations and batches (a rubric view), stored apart from the job record under
// a key the kind names. Such a kind takes red gates, unchanged renders and a person's
// answers itself (each is a loop step), is never redriven (its next run continues the
// loop), and its callers load its state for Decide (Step.State) and store it when Decide
// changed it. What the state holds is the kind's alone.
type Looping interface {
	Kind
	// StateKey names the job's state in the kinds' state bucket; "" when the job has
	// none (a feature that could not be planned).
	StateKey(tenant string, spec events.JobSpec) string
	// StateDocuments are the blobs, under the job's tenant, its state is read with
	// besides what is stored under StateKey (a view's rubric).
	StateDocuments(spec events.JobSpec) []events.Blob
	// LoadState is the state Decide takes, from what is stored under StateKey (nil for a
	// state never stored) and the documents' bytes, in StateDocuments' order.
	LoadState(spec events.JobSpec, stored []byte, docs [][]byte) (State, error)
	// Reset applies an operator's reset of the job's loop (view.reset) to its state and
	// reports whether it changed anything.
	Reset(s State, ev events.Event, p *events.ViewReset, now time.Time) bool
	// Claiming reports whether the job's outcome may wait for a person, one job of its
	// batch at a time (rubric's HE-2 spot-check): the job claims the batch's claim when
	// its outcome would wait (Step.WantsClaim), and while the holder waits, the loop
	// inputs of the batch's other claiming jobs wait too.
	Claiming(spec events.JobSpec) bool
}

// State is a looping job's own state (Looping): the kind's value, which the rules hand
// to Decide and store as the kind encodes it, knowing nothing of what it holds.
type State interface {
	// Clone is a copy Decide may change while the caller's stays as loaded: the rules
	// may decide one input twice (a claim made in between).
	Clone() State
	// Encode is what is stored of the state under its key.
	Encode() ([]byte, error)
}

// Wired is a kind that brings its own wire schema, its job's part of the events being
// its own document (events.JobSpec.Part, GatesDone.Part, VerdictEmitted.Part): the
// registry registers it with the wire schema (events.RegisterKind) when it adds the kind.
// The kinds that ship register typed parts instead (events.Parts), from their own
// packages as those initialise.
type Wired interface {
	Wire() events.KindWire
}

// Calling is a kind whose verdicts carry judge calls: it lists them, one per call and in
// the order the verdict holds them (records.CallOf), for the job record, the audit's read-back
// and the trust report's costs. Every kind that asks a judge implements it; the rulebook
// reads no kind's fields of a verdict itself (rulebook.CallsOf).
type Calling interface {
	Calls(v *events.VerdictEmitted) []records.Call
}

// Scripted is a kind the offline judge (pkg/judge/scripted) answers for without a model.
type Scripted interface {
	// ScriptedAnswer is the canned answer a fixture setting stands for (a --scripted-*
	// flag's value) to a request of kind req, which is the kind's own name or another
	// request its stages make (equivalence's runner), checked by the kind's own parser,
	// and the name the fixture goes by. ok is false when the kind makes no such request.
	ScriptedAnswer(req, setting string) (answer []byte, name string, ok bool, err error)
}

// Fixture is one canned answer of the offline judge (`--judge scripted`) that a kind
// brings, with the flag that sets it: every request of kind Request without a recorded
// answer is answered with the setting (Scripted.ScriptedAnswer reads it). The judge's
// flags are built from the kinds' fixtures (Fixtured), so no command names a kind's.
type Fixture struct {
	// Request is the request kind answered: the kind's name, or another request its
	// stages make (equivalence's runner).
	Request string
	// Flag is the flag's name (scripted-critic; its TRIBUNAL_ variable follows); empty
	// for a fixture that is always on, with Default as its setting.
	Flag string
	// Default is the setting when the flag is not given; empty answers nothing, so every
	// such request needs a recorded answer.
	Default string
	// Usage is the flag's help text.
	Usage string
	// Names says the fixture's name is the scripted model's name, which every verdict
	// carries (ab's fixed-A, which readers of ab results have always seen); the others
	// name the model only when nothing else does.
	Names bool
}

// Fixtured is a kind whose requests the offline judge answers with fixtures it lists.
type Fixtured interface {
	Fixtures() []Fixture
}

// Summarizing is a kind that says in a few words who judges a planned AC, for the JUDGES
// column of `tribunal validate`: jobs is the AC's number of jobs (a rubric feature's
// views), e its estimate. A kind without it shows "-".
type Summarizing interface {
	JudgesSummary(jobs int, e Estimate) string
}

// Count is n and its noun, plural when n is not 1: "1 view", "3 cases".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Spending is a kind whose jobs name models or panels a team's allowance bounds: it says
// which, by the fields of its spec (spend.Ask), and the allowance checks them
// (spend.Allowance.Check, which the registry points at the kinds).
type Spending interface {
	Asks(spec events.JobSpec) spend.Ask
}

// Requesting is a kind whose renderer stage asks the provider too, with request kinds of
// its own (equivalence's runner): the renderer's provider metrics are primed with them.
type Requesting interface {
	RenderRequests() []string
}

// Grading is a kind that says what its rows count for in a pipeline (pkg/verdicts),
// read from the row alone so that results.json from another machine grades the same:
// GradeRow is the grade of a row with a verdict that no route tag nor final status
// grades already ("clean", "polish", "fix" or "block"; ok false for a row its rules give
// no grade, which counts as a schema violation), ScoreRow its score in [0, 1], higher
// better for ours (ok false when the kind gives none).
type Grading interface {
	GradeRow(r Row) (grade string, ok bool)
	ScoreRow(r Row) (score float64, ok bool)
}

// ScriptedNote marks every canned answer (Scripted), so no one mistakes it for a
// model's judgment.
const ScriptedNote = "scripted fixture answer: no model was asked"

// Settling is a kind some of whose jobs have their outcome at submission, before anything
// is rendered: a rubric view that cannot be judged until a person supplies a reference
// image (HE-1), where only the target's canonical view renders a candidate.
type Settling interface {
	Kind
	// Settle decides a job just recorded, from its spec alone, when nothing needs to be
	// rendered for it, and reports whether it did.
	Settle(j *records.Job) bool
}

// Unblinding is a kind whose judge sees its artifacts in blind slots (ab): for reviewers,
// it says which artifact each slot of one call was.
type Unblinding interface {
	Kind
	// SlotLegend is the legend of a job's call ("slot A was the reference, slot B
	// ours"), "" when it cannot tell.
	SlotLegend(j *records.Job, c records.Call) string
}

// Outputs is a kind that keeps files beside a batch's results (the rubric kind: the
// seed's signoff.json, each iteration's gate-result.json and the HE-1 candidates).
type Outputs interface {
	// Files are a final job's files.
	Files(j *records.Job) []File
}

// FileChange is a change a kind plans to a file of the batch's own (File.Change). The
// client applies it to the file as it is when the results are written; the kind says
// what the change is and when it is still needed.
type FileChange interface {
	// Apply returns the file's next content from its current one; applied is false when
	// the file needs the change no more (an earlier run, or a person, got there first).
	Apply(current []byte) (next []byte, applied bool, err error)
	// Describe is the change in a line and why the kind makes it, for the list of
	// changes applied and their errors: `replace /targets/0/references/0/status
	// "candidate"`, "HE-1".
	Describe() (what, why string)
}

// File is one file a kind keeps beside the results, by its slash-separated path under
// the batch's output folder: an Item appended to the JSON list at Path, or a Blob copied
// from blob storage.
type File struct {
	Path string
	Item any
	Blob *events.Blob
	// Doc is a JSON document written as it is, indented (a rubric view's loop state, an
	// iteration's verdict).
	Doc any
	// Change is a change to a file of the batch's own at Beside, relative to the batch's
	// folder (a rubric feature's spec.json, whose canonical reference entry HE-1 sets to
	// candidate). Path is empty. Only a client that holds the batch's folder applies it;
	// the results of the others carry it for the team.
	Change FileChange
	// Beside, when set, is where the batch asked to keep the file as well: a
	// slash-separated path relative to the batch's folder (a rubric feature's
	// .argus-runs/, where the seed keeps its files).
	Beside string
	// Identity names the fields that identify an Item in its list. A list written
	// Beside is merged into the one already there: an item replaces the earlier item
	// with the same values of these fields, and the others stay, as the seed appends each
	// sign-off to .argus-runs/signoff.json.
	Identity []string
}
