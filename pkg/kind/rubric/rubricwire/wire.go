// Package rubricwire is the rubric kind's part of the events: a view's job spec, its
// judge-facing context, the judge's answer and the loop's decision, and the checks each
// rubric event passes on the way in. It stands below the rubric kind's other packages
// (argus and views read a view's spec), next to pkg/events, and imports nothing else.
package rubricwire

import (
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// The parts travel under the key "rubric", where they were fields of pkg/events before
// (events.Parts).
func init() {
	events.RegisterKind(events.KindRubric, events.KindWire{
		Spec: func(s events.JobSpec) error {
			rs := SpecOf(s.KindPart)
			if err := rs.validate(); err != nil {
				return err
			}
			if s.Review != nil && s.Review.Decides && rs.Blocked == "" {
				// A view's outcome is its loop's; people's reviews of it only measure the
				// judge (pkg/kind/rubric, RefuseDecides).
				return events.Invalid("review.decides", "a rubric view's reviews measure its judge and decide nothing")
			}
			return nil
		},
		Gates: func(*events.GatesDone) error { return nil },
		Verdict: func(p *events.VerdictEmitted) error {
			v := VoteOf(p.KindPart)
			if v == nil {
				return events.Missing("rubric")
			}
			return events.ValidStatus("rubric.status", v.Status)
		},
		Parts: events.Parts{
			JSON:    "Rubric",
			Spec:    func() any { return new(Spec) },
			Gates:   func() any { return new(Judging) },
			Verdict: func() any { return new(Vote) },
			Decided: func() any { return new(Decision) },
		},
	})
}

// SpecOf is rubric's part of a job spec (its KindPart); nil when it has none.
func SpecOf(part any) *Spec {
	s, _ := part.(*Spec)
	return s
}

// JudgingOf is rubric's part of a gates.done (its KindPart); nil when it has none.
func JudgingOf(part any) *Judging {
	j, _ := part.(*Judging)
	return j
}

// VoteOf is rubric's part of a verdict (its KindPart); nil when it has none.
func VoteOf(part any) *Vote {
	v, _ := part.(*Vote)
	return v
}

// DecisionOf is rubric's part of a decision (its KindPart); nil when it has none.
func DecisionOf(part any) *Decision {
	d, _ := part.(*Decision)
	return d
}

// Spec is one view of a `rubric` feature: a target in one state and appearance.
// Every view converges on its own, so each is a job.
type Spec struct {
	Feature    string `msgpack:"feature"`
	Target     string `msgpack:"target"`
	State      string `msgpack:"state"`
	Appearance string `msgpack:"appearance"`
	Fixture    string `msgpack:"fixture,omitempty"`
	// Route is where the sensor finds the target (a URL for the web sensor).
	Route string `msgpack:"route"`
	// Adapter names the sensor: "web" or an operator-registered command adapter.
	Adapter string `msgpack:"adapter"`
	Width   int    `msgpack:"width"`
	Height  int    `msgpack:"height"`
	// Canonical marks the view whose reference anchors the target.
	Canonical bool `msgpack:"canonical,omitempty"`
	// ReferenceStatus is the target's canonical reference: present, needed or candidate.
	ReferenceStatus string `msgpack:"reference_status"`
	// ReferenceSource is human or candidate.
	ReferenceSource string       `msgpack:"reference_source,omitempty"`
	Reference       *events.Blob `msgpack:"reference,omitempty"`
	// The feature's documents in blob storage.
	SpecJSON events.Blob  `msgpack:"spec_json"`
	SpecText events.Blob  `msgpack:"spec_text"`
	Tokens   events.Blob  `msgpack:"tokens"`
	Pairs    *events.Blob `msgpack:"pairs,omitempty"`
	Rubric   events.Blob  `msgpack:"rubric"`
	// A11yContract are the ids the probe must expose.
	A11yContract []string `msgpack:"a11y_contract,omitempty"`
	Mode         string   `msgpack:"mode"`
	// MaxIterations overrides the rubric's budget when positive.
	MaxIterations int `msgpack:"max_iterations,omitempty"`
	// Confirm marks a render requested after an all-pass verdict, with no edit between:
	// if it is unchanged it confirms the pass without a judge call.
	Confirm bool `msgpack:"confirm,omitempty"`
	// Blocked is set by the client when the feature cannot run (invalid spec).
	Blocked string `msgpack:"blocked,omitempty"`
	// Runs is the feature's .argus-runs/ folder, slash-separated and relative to the batch
	// folder, when the batch asks for the seed's files there as well (argus_runs).
	Runs string `msgpack:"runs,omitempty"`
	// SpecChange is the change HE-1 makes to the feature's spec.json when this view (the
	// target's canonical one, its reference needed) renders a candidate: seed 004 sets the
	// manifest entry to candidate. Set by planning; nil for any other view.
	SpecChange *SpecChange `msgpack:"spec_change,omitempty"`
	// Project is what the planning client found of the feature's project (seed 004's
	// layout, see Project). Planning always sets it: a spec without it says nothing
	// about the project's gates adapter, and a gater with no gates adapter of its own
	// blocks such a view rather than skip its platform gates.
	Project *Project `msgpack:"project,omitempty"`
}

// SpecChange is one change to a feature's spec.json, planned from the spec as it
// was read. A client holding the batch's folder applies it (the all-in-one mode, where the
// spec is its user's file); on a shared deployment the results carry it for the team to
// apply, since no service writes a team's files.
type SpecChange struct {
	// File is spec.json's path relative to the batch folder, slash-separated; "" when it
	// lies outside the batch folder, where no client writes.
	File string `msgpack:"file,omitempty"`
	// Patch is the change as one JSON Patch operation (RFC 6902), in JSON.
	Patch string `msgpack:"patch"`
}

// Project is a rubric view's project as the planning client found it on its
// machine: the folder holding argus/, with argus/adapters/{adapter}/sense.sh and
// gates.sh. Only a renderer or gater running on that machine for its one user (the
// all-in-one mode) runs the scripts named here; a shared one runs only what its operator
// registered and reads the record to refuse to skip a project's gates.
type Project struct {
	// Root is the project root on the client's machine, absolute.
	Root string `msgpack:"root,omitempty"`
	// Spec is the feature's spec.json relative to Root, slash-separated.
	Spec string `msgpack:"spec,omitempty"`
	// Sense and Gates are the scripts the project ships for the view's adapter,
	// argus/adapters/{adapter}/sense.sh and gates.sh; "" when it ships none.
	Sense string `msgpack:"sense,omitempty"`
	Gates string `msgpack:"gates,omitempty"`
}

// validate holds the scripts to the one path each may have, so a record can name
// nothing but the seed's layout.
func (p *Project) validate(adapter string) error {
	if p == nil {
		return nil
	}
	for f, v := range map[string]string{"sense": p.Sense, "gates": p.Gates} {
		if want := "argus/adapters/" + adapter + "/" + f + ".sh"; v != "" && v != want {
			return events.Invalid("rubric.project."+f, fmt.Sprintf("want %q or nothing, got %q", want, v))
		}
	}
	if p.Spec != "" && (strings.HasPrefix(p.Spec, "/") || strings.HasPrefix(p.Spec, "../") || p.Spec == "..") {
		return events.Invalid("rubric.project.spec", fmt.Sprintf("want a path relative to the project root, got %q", p.Spec))
	}
	if p.Root != "" && !strings.HasPrefix(p.Root, "/") {
		return events.Invalid("rubric.project.root", fmt.Sprintf("want an absolute path, got %q", p.Root))
	}
	return nil
}

func (s *Spec) validate() error {
	if s == nil {
		return events.Missing("rubric")
	}
	if s.Blocked != "" {
		return nil
	}
	for f, v := range map[string]string{"rubric.feature": s.Feature, "rubric.target": s.Target, "rubric.state": s.State,
		"rubric.appearance": s.Appearance, "rubric.route": s.Route, "rubric.adapter": s.Adapter} {
		if v == "" {
			return events.Missing(f)
		}
	}
	switch s.Mode {
	case events.ModeHeadless, events.ModeInteractive, events.ModeReportOnly:
	default:
		return events.Invalid("rubric.mode", fmt.Sprintf("want headless, interactive or report-only, got %q", s.Mode))
	}
	switch s.ReferenceStatus {
	case "present", "needed", "candidate":
	default:
		return events.Invalid("rubric.reference_status", fmt.Sprintf("want present, needed or candidate, got %q", s.ReferenceStatus))
	}
	for f, b := range map[string]events.Blob{"rubric.spec_json": s.SpecJSON, "rubric.spec_text": s.SpecText, "rubric.tokens": s.Tokens, "rubric.rubric": s.Rubric} {
		if err := b.Validate(f); err != nil {
			return err
		}
	}
	return s.Project.validate(s.Adapter)
}

// ViewKey names a view across runs: loop state, previous render and baseline are kept
// per tenant under it.
func (s *Spec) ViewKey() string {
	return s.Feature + "." + s.Target + "." + s.State + "." + s.Appearance
}

// Judging is the judge-facing context of a rubric view: which view it is and how
// to treat its reference. It holds no diff and no builder note.
type Judging struct {
	Feature         string `msgpack:"feature"`
	Target          string `msgpack:"target"`
	State           string `msgpack:"state"`
	Appearance      string `msgpack:"appearance"`
	ReferenceSource string `msgpack:"reference_source"`
	// LoopIteration is the view's loop iteration this verdict is for (from 1).
	LoopIteration int `msgpack:"loop_iteration"`
	// Loop numbers the view's loops: 0 for its first; an operator's reset or a changed
	// spec, rubric or reference starts the next. With LoopIteration it names the
	// iteration a judgment is for, so no cached answer of another iteration stands in
	// for a fresh one.
	Loop int `msgpack:"loop,omitempty"`
}

// Vote is a rubric judge's answer: the verdict JSON as the judge gave it (with
// the view's identity filled in by the judge service), before the aggregator re-derives
// all_pass and failed_dimensions.
type Vote struct {
	Judge events.JudgeInfo `msgpack:"judge"`
	// Render is the render the verdict is about.
	Render events.Blob `msgpack:"render"`
	// GateResult is the gate-result.json the judge was shown (the gates were green).
	GateResult *events.Blob      `msgpack:"gate_result,omitempty"`
	Status     events.VoteStatus `msgpack:"status"`
	Error      string            `msgpack:"error,omitempty"`
	Verdict    string            `msgpack:"verdict,omitempty"`
	Raw        string            `msgpack:"raw,omitempty"`
}

// Decision is the aggregator's loop decision for one view iteration.
type Decision struct {
	View             string   `msgpack:"view" json:"view"`
	LoopIteration    int      `msgpack:"loop_iteration" json:"loop_iteration"`
	AllPass          bool     `msgpack:"all_pass" json:"all_pass"`
	FailedDimensions []string `msgpack:"failed_dimensions,omitempty" json:"failed_dimensions,omitempty"`
	FixDimensions    []string `msgpack:"fix_dimensions,omitempty" json:"fix_dimensions,omitempty"`
	FailingGates     []string `msgpack:"failing_gates,omitempty" json:"failing_gates,omitempty"`
	Frozen           []string `msgpack:"frozen,omitempty" json:"frozen,omitempty"`
	NewlyFrozen      []string `msgpack:"newly_frozen,omitempty" json:"newly_frozen,omitempty"`
	// Outcome is what happens next: confirm (re-render without an edit after a pass),
	// recheck (re-render without an edit and judge again: the only failing dimensions
	// are frozen, so the builder has nothing to fix), fix (the builder edits),
	// signed_off, budget_exhausted, reported, needs_context.
	Outcome           string `msgpack:"outcome" json:"outcome"`
	ConsecutivePasses int    `msgpack:"consecutive_passes" json:"consecutive_passes"`
	Unchanged         bool   `msgpack:"unchanged,omitempty" json:"unchanged,omitempty"`
	// Loop numbers the view's loop this step belongs to (0 for the first).
	Loop int `msgpack:"loop,omitempty" json:"loop,omitempty"`
	// NewLoop names what changed since the view's loop began (spec.json, spec.md,
	// tokens.json, contrast-pairs.json, rubric.json, the reference) when this step began
	// a new loop because of it.
	NewLoop []string `msgpack:"new_loop,omitempty" json:"new_loop,omitempty"`
}
