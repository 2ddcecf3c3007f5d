// Package checklist is an example judge kind, added to tribunal with this folder and one
// registry line (kinds.Add): a judge checks one output against the AC's checklist, an
// item per line of its criterion, and the job passes when the output meets every item.
// It proves the seam a kind plugs into; it is not one of the kinds tribunal ships.
//
// This package is the kind's rules (what an answer comes to, the manifest, the rows),
// which do no I/O; its stages (plan, render, gate, judge) are in ./stages. Its events
// carry its own part (events.JobSpec.Part, GatesDone.Part, VerdictEmitted.Part), whose
// wire schema it registers (Wire); the offline judge answers it through Scripted.
package checklist

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Name is the kind's wire name.
const Name events.Kind = "checklist"

// Limits of a checklist.
const (
	MaxItems    = 50
	MaxItemText = 500
)

// Kind is the checklist kind's rules.
type Kind struct{}

var (
	_ kind.Kind     = Kind{}
	_ kind.Wired    = Kind{}
	_ kind.Calling  = Kind{}
	_ kind.Scripted = Kind{}
	_ kind.Fixtured = Kind{}
	_ kind.Grading  = Kind{}
)

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return Name }

// Spec is a checklist job's part of its spec: the items and the output checked against
// them.
type Spec struct {
	Items  []string      `msgpack:"items"`
	Output events.Source `msgpack:"output"`
}

// Judging is the judge-facing part of a gated job: the items, without the output's name.
type Judging struct {
	Items []string `msgpack:"items"`
}

// Vote is a verdict's part: the judge's one call and its answer.
type Vote struct {
	Judge  events.JudgeInfo  `msgpack:"judge"`
	Status events.VoteStatus `msgpack:"status"`
	Error  string            `msgpack:"error,omitempty"`
	Raw    string            `msgpack:"raw,omitempty"`
	Unmet  []int             `msgpack:"unmet,omitempty"`
	Note   string            `msgpack:"note,omitempty"`
}

// Result is a checklist job's result on its record.
type Result struct {
	Items  []string `json:"items,omitempty"`
	Unmet  []int    `json:"unmet,omitempty"`
	Note   string   `json:"note,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Items are the non-empty lines of a criterion, trimmed.
func Items(criterion string) []string {
	var out []string
	for _, l := range strings.Split(criterion, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// SpecOf decodes a job's part of its spec.
func SpecOf(spec events.JobSpec) (Spec, error) {
	var s Spec
	err := events.DecodePart(spec.Part, &s)
	return s, err
}

// VoteOf decodes a verdict's part.
func VoteOf(v *events.VerdictEmitted) (Vote, error) {
	var vote Vote
	err := events.DecodePart(v.Part, &vote)
	return vote, err
}

// Wire implements kind.Wired: the checks every checklist event's part passes on the way
// in and out.
func (Kind) Wire() events.KindWire {
	return events.KindWire{
		Spec: func(spec events.JobSpec) error {
			s, err := SpecOf(spec)
			if err != nil {
				return err
			}
			if err := checkItems("part.items", s.Items); err != nil {
				return err
			}
			return s.Output.Validate("part.output")
		},
		Gates: func(gd *events.GatesDone) error {
			if len(gd.Slots) != 1 || gd.Slots[0].Name != "output" {
				return events.Invalid("slots", "checklist needs exactly one slot named output")
			}
			var j Judging
			if err := events.DecodePart(gd.Part, &j); err != nil {
				return err
			}
			return checkItems("part.items", j.Items)
		},
		Verdict: func(v *events.VerdictEmitted) error {
			vote, err := VoteOf(v)
			if err != nil {
				return err
			}
			if !vote.Status.Valid() {
				return events.Invalid("part.status", fmt.Sprintf("not a vote status: %q", vote.Status))
			}
			return nil
		},
	}
}

func checkItems(field string, items []string) error {
	if len(items) == 0 {
		return events.Missing(field)
	}
	if len(items) > MaxItems {
		return events.Invalid(field, fmt.Sprintf("%d items, at most %d", len(items), MaxItems))
	}
	for i, it := range items {
		if it == "" || utf8.RuneCountInString(it) > MaxItemText {
			return events.Invalid(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("want 1 to %d characters", MaxItemText))
		}
	}
	return nil
}

// ResultOf reads a checklist job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "checklist result")
}

func setResult(j *records.Job, r Result) error {
	return kind.Marshal(j, &j.Result, "checklist result", r)
}

// Decide implements kind.Kind: the job passes when the judge names no unmet item; an
// item number outside the checklist makes the answer a schema violation.
func (Kind) Decide(st *kind.Step) error {
	ve, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok || ve.Kind != Name {
		return fmt.Errorf("%w: a checklist job takes checklist verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	vote, err := VoteOf(ve)
	if err != nil {
		return fmt.Errorf("%w: %v", kind.ErrNotForKind, err)
	}
	j := st.Job
	spec, err := SpecOf(j.Spec)
	if err != nil {
		return fmt.Errorf("%w: job %s: %v", kind.ErrNotForKind, j.Key(), err)
	}
	name := kind.JudgeName(vote.Judge)
	j.Judges = []string{name}
	j.Decided = &events.IterationDecided{Kind: Name, ACID: j.ACID, Final: true, Judges: []string{name}}
	switch vote.Status {
	case events.VoteUnavailable, events.VoteBlocked:
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", fmt.Sprintf("judge unavailable (%s): %s", name, vote.Error)
		return setResult(j, Result{Items: spec.Items, Reason: j.BlockReason})
	case events.VoteOK:
		problem := ""
		for _, n := range vote.Unmet {
			if n < 1 || n > len(spec.Items) {
				problem = fmt.Sprintf("unmet item %d: the checklist has %d", n, len(spec.Items))
			}
		}
		if problem == "" {
			j.Status, j.Decided.Status = events.StatusCompared, events.StatusCompared
			return setResult(j, Result{Items: spec.Items, Unmet: vote.Unmet, Note: vote.Note})
		}
		vote.Error = problem
	}
	j.Status, j.Decided.Status = events.StatusSchemaViolation, events.StatusSchemaViolation
	j.BlockReason = fmt.Sprintf("%s (%s)", vote.Error, name)
	return setResult(j, Result{Items: spec.Items, Reason: j.BlockReason})
}

// Blocked implements kind.Kind.
func (Kind) Blocked(j *records.Job) {
	_ = setResult(j, Result{Reason: j.BlockReason})
}

// Outcome implements kind.Kind: an output that meets every item is clean.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	if r, err := ResultOf(j); err == nil && r != nil && j.Status == events.StatusCompared && len(r.Unmet) == 0 {
		return kind.OutcomeClean
	}
	return kind.OutcomeFinding
}

// ManifestRow is one AC of the checklist manifest.
type ManifestRow struct {
	kind.ManifestEntry
	Checklist *Result `json:"checklist,omitempty"`
}

// Manifest implements kind.Kind: one result per AC, in batch order.
func (Kind) Manifest(_, batch string) kind.Manifest {
	return kind.NewListFold(Name, batch, func(j *records.Job) ManifestRow {
		r, _ := ResultOf(j)
		return ManifestRow{ManifestEntry: kind.EntryOf(j), Checklist: r}
	})
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	r, _ := ResultOf(j)
	if r == nil || j.Status != events.StatusCompared {
		return row
	}
	row.Verdict = "pass"
	if len(r.Unmet) > 0 {
		row.Verdict = "fail"
	}
	row.Detail = fmt.Sprintf("%d of %d items met", len(r.Items)-len(r.Unmet), len(r.Items))
	if r.Note != "" {
		row.Detail += ": " + r.Note
	}
	return row
}

// Estimate implements kind.Kind: one call.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	s, err := SpecOf(spec)
	if err != nil {
		return kind.Estimate{}
	}
	return kind.Estimate{Sources: []kind.Source{{Role: "output", Src: s.Output}}, JudgeCalls: 1, MaxJudgeCalls: 1}
}

// Calls implements kind.Calling: a verdict's one call.
func (Kind) Calls(v *events.VerdictEmitted) []records.Call {
	vote, err := VoteOf(v)
	if err != nil {
		return nil
	}
	return []records.Call{records.CallOf("", vote.Status, vote.Judge)}
}

// Fixtures implements kind.Fixtured: `--judge scripted` answers every checklist call
// without a recorded answer with every item met.
func (Kind) Fixtures() []kind.Fixture {
	return []kind.Fixture{{Request: string(Name), Default: "pass"}}
}

// GradeRow implements kind.Grading: an output that meets every item is clean; one that
// misses an item is a finding to fix.
func (Kind) GradeRow(r kind.Row) (string, bool) {
	switch r.Verdict {
	case "pass":
		return "clean", true
	case "fail":
		return "fix", true
	}
	return "", false
}

// ScoreRow implements kind.Grading: a checklist gives no score.
func (Kind) ScoreRow(kind.Row) (float64, bool) { return 0, false }

// ScriptedAnswer implements kind.Scripted: setting "pass" answers every checklist call
// without a recorded answer with every item met.
func (Kind) ScriptedAnswer(req, setting string) ([]byte, string, bool, error) {
	if req != string(Name) {
		return nil, "", false, nil
	}
	if setting != "pass" {
		return nil, "", true, fmt.Errorf("checklist fixture %q: want pass", setting)
	}
	answer := []byte(`{"unmet": [], "note": "` + kind.ScriptedNote + `"}`)
	if _, err := ParseAnswer(answer); err != nil {
		return nil, "", true, err
	}
	return answer, "fixed-checklist-pass", true, nil
}
