package rubric

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Kind is the `rubric` judge kind.
type Kind struct{}

var (
	_ kind.Looping    = Kind{}
	_ kind.Outputs    = Kind{}
	_ kind.Settling   = Kind{}
	_ kind.Describing = Kind{}
)

// Settle implements kind.Settling: HE-1 without a render. Seed 004 renders one candidate
// per target, for its canonical view ("≤1 reference image per screen"), and judges none of
// the target's views until a reference exists. So a view of a target whose canonical
// reference is not present needs context at once, rendering nothing, unless it is the
// canonical view of a target whose reference is needed outside report-only: that one
// renders the candidate (the gates offer it and end the view needs_context). A target whose
// reference is a candidate already waits for the person to approve it, and report-only
// only reports the gap.
func (Kind) Settle(j *records.Job) bool {
	reason := settled(rubricwire.SpecOf(j.Spec.KindPart))
	if reason == "" {
		return false
	}
	j.Status, j.BlockStage, j.BlockReason = events.StatusNeedsContext, "reference", reason
	return true
}

// settled is why a view needs context before anything is rendered (Settle), "" when it
// is to be rendered.
func settled(rs *rubricwire.Spec) string {
	if rs == nil || rs.Blocked != "" || rs.ReferenceStatus == argus.RefPresent {
		return ""
	}
	view := argus.CandidateFile(rs.Target, rs.State, rs.Appearance)
	var reason string
	switch {
	case rs.ReferenceStatus == argus.RefCandidate && rs.Canonical:
		reason = fmt.Sprintf("target %s: the candidate .argus-runs/%s awaits a person: move it to %s as it is (status present, source candidate), replace it (source human), or correct spec.md",
			rs.Target, view, argus.ReferenceFile(rs.Target, rs.State, rs.Appearance))
	case rs.ReferenceStatus == argus.RefCandidate:
		reason = fmt.Sprintf("target %s: its canonical view's candidate awaits a person's approval; this view is judged once the target has a reference", rs.Target)
	case rs.Mode == events.ModeReportOnly:
		reason = fmt.Sprintf("target %s has no approved reference (status %s); report-only renders no candidate", rs.Target, rs.ReferenceStatus)
	case !rs.Canonical:
		reason = fmt.Sprintf("target %s has no approved reference (status %s): its canonical view renders the candidate, and this view is judged once the target has a reference", rs.Target, rs.ReferenceStatus)
	}
	return reason
}

// Files implements kind.Outputs, the files the seed keeps under .argus-runs/: a view's
// sign-off in its feature's signoff.json (the seed's shape), its loop state as
// state-<target>-<state>-<appearance>.json (loop_state.py's state file), each judged
// iteration's normalized verdict as <target>-<state>-<appearance>/iteration-<n>.json and
// each iteration's gate-result.json under <target>-<state>-<appearance>/iteration-<n>/,
// and its HE-1 candidate under candidates/. When the batch asks for it (argus_runs), each
// is also kept at the same place under the feature's own .argus-runs/ folder. A report-only
// view keeps none there: the seed's dry run changes nothing durable. An HE-1 candidate goes
// to the feature's .argus-runs/ whenever its spec.json can be changed to name it as a
// candidate (the spec change comes with it), since the next run points the person there.
func (Kind) Files(j *records.Job) []kind.File {
	rs := rubricwire.SpecOf(j.Spec.KindPart)
	st, _ := StateOf(j)
	if rs == nil || st == nil || rs.Feature == "" {
		return nil
	}
	dry := rs.Mode == events.ModeReportOnly
	var out []kind.File
	add := func(f kind.File, rel string) {
		f.Path = path.Join(rs.Feature, rel)
		if rs.Runs != "" && !dry {
			f.Beside = path.Join(rs.Runs, rel)
		}
		out = append(out, f)
	}
	view := rs.Target + "-" + rs.State + "-" + rs.Appearance
	if st.SignOff != nil {
		add(kind.File{Item: *st.SignOff, Identity: []string{"feature", "target", "state", "appearance"}}, "signoff.json")
	}
	if !dry && st.Loop.Feature != "" {
		add(kind.File{Doc: st.Loop}, "state-"+view+".json")
	}
	for _, v := range st.Verdicts {
		add(kind.File{Doc: v.Verdict}, path.Join(view, "iteration-"+strconv.Itoa(v.Iteration)+".json"))
	}
	for _, g := range st.GateResults {
		b := g.Blob
		add(kind.File{Blob: &b}, path.Join(view, "iteration-"+strconv.Itoa(g.Iteration), "gate-result.json"))
	}
	if st.Candidate != nil {
		rel := argus.CandidateFile(rs.Target, rs.State, rs.Appearance)
		add(kind.File{Blob: st.Candidate}, rel)
		if c := specChange(rs); c != nil && !dry {
			if rs.Runs == "" && rs.SpecChange.File != "" {
				out[len(out)-1].Beside = path.Join(path.Dir(rs.SpecChange.File), ".argus-runs", rel)
			}
			out = append(out, kind.File{Change: *c, Beside: rs.SpecChange.File})
		}
	}
	return out
}

// specChange is the view's planned HE-1 change to spec.json, nil when it has none.
func specChange(rs *rubricwire.Spec) *argus.SpecChange {
	if rs.SpecChange == nil {
		return nil
	}
	var c argus.SpecChange
	if err := json.Unmarshal([]byte(rs.SpecChange.Patch), &c); err != nil {
		return nil
	}
	return &c
}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindRubric }

// StateKey implements kind.Looping: a view's key in the views bucket.
func (Kind) StateKey(tenant string, spec events.JobSpec) string {
	if rubricwire.SpecOf(spec.KindPart) == nil || rubricwire.SpecOf(spec.KindPart).Blocked != "" {
		return ""
	}
	return views.Key(tenant, rubricwire.SpecOf(spec.KindPart))
}

// Claiming implements kind.Looping: an interactive view's sign-off may wait for a
// person's spot-check (HE-2).
func (Kind) Claiming(spec events.JobSpec) bool {
	return rubricwire.SpecOf(spec.KindPart) != nil && rubricwire.SpecOf(spec.KindPart).Mode == events.ModeInteractive
}

// Blocked implements kind.Kind: a blocked view has no loop state to add.
func (Kind) Blocked(*records.Job) {}

// Outcome implements kind.Kind: a signed-off view is clean, a report-only view is clean
// when all passed, a view waiting for fixes is a finding, and a view that spent its budget
// or lacks a reference is blocked.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	switch j.Status {
	case events.StatusSignedOff:
		return kind.OutcomeClean
	case events.StatusReported:
		if s, _ := StateOf(j); s != nil && s.Decision != nil && s.Decision.AllPass {
			return kind.OutcomeClean
		}
		return kind.OutcomeFinding
	case events.StatusNeedsFixes:
		return kind.OutcomeFinding
	case events.StatusBudgetExhausted, events.StatusNeedsContext:
		return kind.OutcomeBlocked
	}
	return kind.OutcomeSchemaViolation
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	rb, _ := StateOf(j)
	if rb == nil || rb.Decision == nil {
		return row
	}
	d := rb.Decision
	row.Verdict = d.Outcome
	row.Detail = fmt.Sprintf("view %s, loop iteration %d", d.View, d.LoopIteration)
	if d.Loop > 0 {
		// A reset or a changed target began another loop of the view.
		row.Detail += fmt.Sprintf(" of loop %d", d.Loop)
	}
	if len(d.FixDimensions) > 0 {
		row.Detail += fmt.Sprintf("; fix %v", d.FixDimensions)
	}
	if len(d.FailingGates) > 0 {
		row.Detail += fmt.Sprintf("; failing gates %v", d.FailingGates)
	}
	if len(d.Frozen) > 0 {
		row.Detail += fmt.Sprintf("; frozen %v", d.Frozen)
	}
	if rb.SignOff != nil {
		row.Detail += "; signed off, human spot-check " + rb.SignOff.HumanSpotcheck
	}
	return row
}

// Manifest implements kind.Kind: each feature's status and its views' loop outcomes.
func (Kind) Manifest(_, batch string) kind.Manifest {
	return &manifestFold{batch: batch}
}

// FeatureManifest is the manifest of the rubric kind: each feature's status and its views'
// loop outcomes, sign-offs included.
type FeatureManifest struct {
	kind.ManifestHeader
	Features []FeatureResult `json:"features"`
}

// FeatureResult is one feature's folded status and its views.
type FeatureResult struct {
	Feature string              `json:"feature"`
	Status  argus.FeatureStatus `json:"status"`
	Reasons []string            `json:"reasons"`
	Views   []ViewResultRow     `json:"views"`
}

// ViewResultRow is one view's outcome in this batch.
type ViewResultRow struct {
	View        string               `json:"view"`
	Job         string               `json:"job"`
	Status      events.Status        `json:"status"`
	Reason      string               `json:"reason,omitempty"`
	Decision    *rubricwire.Decision `json:"decision,omitempty"`
	LastVerdict *argus.Verdict       `json:"last_verdict,omitempty"`
	SignOff     *argus.SignOff       `json:"signoff,omitempty"`
	Candidate   *events.Blob         `json:"candidate,omitempty"`
	// SpecChange is the change to the feature's spec.json that goes with the candidate
	// (HE-1: its reference entry set to candidate). `tribunal run` applies it to the
	// user's spec.json; on a shared deployment the team applies it.
	SpecChange *SpecChangeRow `json:"spec_change,omitempty"`
	Render     *events.Blob   `json:"render,omitempty"`
}

// SpecChangeRow is a planned change to a feature's spec.json, as the manifest shows it.
type SpecChangeRow struct {
	// File is spec.json relative to the batch folder ("" when outside it).
	File string `json:"file,omitempty"`
	// Patch is the change, one JSON Patch (RFC 6902) operation.
	Patch *argus.SpecChange `json:"patch"`
}

type manifestFold struct {
	batch string
	views []foldedView
}

// foldedView is what the feature manifest needs of one view's job.
type foldedView struct {
	index   int
	feature string
	outcome argus.ViewOutcome
	row     ViewResultRow
}

// viewOutcome maps a rubric job's status onto the feature-status fold.
func viewOutcome(j *records.Job, s *State) argus.ViewOutcome {
	rs := rubricwire.SpecOf(j.Spec.KindPart)
	o := argus.ViewOutcome{View: rs.Target + "/" + rs.State + "/" + rs.Appearance, Reason: j.BlockReason}
	if rs.Blocked != "" {
		o.View = j.ACID
	}
	if s != nil {
		o.Frozen = s.Loop.Frozen
		if s.SignOff != nil {
			o.HumanSpotcheck = s.SignOff.HumanSpotcheck
		}
	}
	switch j.Status {
	case events.StatusSignedOff, events.StatusReported:
		o.Result = argus.ViewSignedOff
	case events.StatusBudgetExhausted:
		o.Result = argus.ViewBudgetExhausted
	case events.StatusNeedsContext:
		o.Result = argus.ViewNeedsReference
	case events.StatusNeedsFixes, events.StatusPending, events.StatusAwaitingSpotcheck:
		o.Result = argus.ViewInProgress
	default:
		o.Result = argus.ViewBlocked
		if o.Reason == "" {
			o.Reason = string(j.Status)
		}
	}
	return o
}

func (m *manifestFold) Add(j *records.Job) {
	if rubricwire.SpecOf(j.Spec.KindPart) == nil {
		return
	}
	name := rubricwire.SpecOf(j.Spec.KindPart).Feature
	if name == "" {
		name = j.ACID
	}
	s, _ := StateOf(j)
	vo := viewOutcome(j, s)
	row := ViewResultRow{View: vo.View, Job: j.ACID, Status: j.Status, Reason: j.BlockReason}
	if s != nil {
		row.Decision, row.LastVerdict, row.SignOff, row.Candidate, row.Render = s.Decision, s.LastVerdict, s.SignOff, s.Candidate, s.Render
		if c := specChange(rubricwire.SpecOf(j.Spec.KindPart)); c != nil && s.Candidate != nil {
			row.SpecChange = &SpecChangeRow{File: rubricwire.SpecOf(j.Spec.KindPart).SpecChange.File, Patch: c}
		}
	}
	m.views = append(m.views, foldedView{index: j.Index, feature: name, outcome: vo, row: row})
}

func (m *manifestFold) Build(at time.Time) any {
	if len(m.views) == 0 {
		return nil
	}
	// Jobs are folded in any order; features and views are listed in batch order.
	sort.SliceStable(m.views, func(a, b int) bool { return m.views[a].index < m.views[b].index })
	out := &FeatureManifest{ManifestHeader: kind.ManifestHeader{Kind: events.KindRubric, Source: "tribunal", BatchID: m.batch, GeneratedAt: at.UTC()}}
	byFeature := map[string]int{}
	var inputs []argus.FeatureInput
	for _, v := range m.views {
		i, ok := byFeature[v.feature]
		if !ok {
			i = len(out.Features)
			byFeature[v.feature] = i
			out.Features = append(out.Features, FeatureResult{Feature: v.feature})
			inputs = append(inputs, argus.FeatureInput{})
		}
		inputs[i].Views = append(inputs[i].Views, v.outcome)
		out.Features[i].Views = append(out.Features[i].Views, v.row)
	}
	for i := range out.Features {
		rep := argus.FoldFeatureStatus(inputs[i])
		out.Features[i].Status, out.Features[i].Reasons = rep.Status, rep.Reasons
	}
	return out
}

// Estimate implements kind.Kind: a view is judged at least once, and at most once per
// iteration of its budget.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	rs := rubricwire.SpecOf(spec.KindPart)
	if rs == nil {
		return kind.Estimate{}
	}
	if rs.Blocked != "" {
		return kind.Estimate{Blocked: rs.Blocked}
	}
	if settled(rs) != "" {
		// HE-1: nothing is rendered or judged until the target has a reference.
		return kind.Estimate{}
	}
	budget := rs.MaxIterations
	if budget <= 0 {
		budget = argus.DefaultMaxIterations
	}
	return kind.Estimate{JudgeCalls: 1, MaxJudgeCalls: budget}
}

// DescribeRender implements kind.Describing: a render asked for after an all-pass
// verdict, with no edit between, confirms the pass.
func (Kind) DescribeRender(spec events.JobSpec) string {
	if rs := rubricwire.SpecOf(spec.KindPart); rs != nil && rs.Confirm {
		return "confirmation render"
	}
	return ""
}
