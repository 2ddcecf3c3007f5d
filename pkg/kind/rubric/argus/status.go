package argus

import (
	"fmt"
	"strings"
)

// FeatureStatus is the four-state outcome of a feature, plus InProgress for a fold
// taken before every view has finished.
type FeatureStatus string

// Feature statuses.
const (
	// StatusDone: every view signed off, no concerns.
	StatusDone FeatureStatus = "DONE"
	// StatusDoneWithConcerns: every view signed off, but a dimension had frozen on the
	// way (it failed its attempts, then passed again: a view whose frozen dimension
	// keeps failing never signs off and ends BLOCKED at its budget), or a human
	// spot-check named a dimension the judge got wrong.
	StatusDoneWithConcerns FeatureStatus = "DONE_WITH_CONCERNS"
	// StatusBlocked: the spec is invalid, the adapter has no sensor, a view spent its
	// iteration budget, or a view could not be rendered. Never a success.
	StatusBlocked FeatureStatus = "BLOCKED"
	// StatusNeedsContext: a canonical reference waits for a human (needed or
	// candidate), so that target cannot be judged.
	StatusNeedsContext FeatureStatus = "NEEDS_CONTEXT"
	// StatusInProgress: some view is still converging; not a final status.
	StatusInProgress FeatureStatus = "IN_PROGRESS"
)

// ViewResult is where one view's loop ended (or that it has not).
type ViewResult string

// View results.
const (
	ViewSignedOff       ViewResult = "signed_off"
	ViewBudgetExhausted ViewResult = "budget_exhausted"
	ViewNeedsReference  ViewResult = "needs_reference"
	ViewBlocked         ViewResult = "blocked"
	ViewInProgress      ViewResult = "in_progress"
)

// Human spot-check values of a sign-off. Any other non-empty value names the dimension
// the human says the judge got wrong.
const (
	SpotcheckPending  = "pending"
	SpotcheckApproved = "approved"
)

// CheckSpotcheck validates a person's HE-2 answer against the rubric the view was judged
// with: the seed's human "names the dimension the judge got wrong so you can tune
// rubric.json", so a rejection must name one of the rubric's dimensions; anything else
// ("reject", a typo) would be recorded as a dimension nobody can tune. An approval names
// none.
func (r *Rubric) CheckSpotcheck(approved bool, dimension string) error {
	if approved {
		if dimension != "" {
			return fmt.Errorf("an approved spot-check names no dimension, got %q", dimension)
		}
		return nil
	}
	names := r.DimensionNames()
	for _, n := range names {
		if n == dimension {
			return nil
		}
	}
	if dimension == "" {
		return fmt.Errorf("a rejected spot-check names the dimension the judge got wrong: one of %s", strings.Join(names, ", "))
	}
	return fmt.Errorf("%q is not a dimension of the rubric: name one of %s", dimension, strings.Join(names, ", "))
}

// SpotcheckDimension returns the dimension a spot-check value names, if it names one.
func SpotcheckDimension(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" || v == SpotcheckPending || v == SpotcheckApproved {
		return "", false
	}
	return v, true
}

// ViewOutcome is one view's contribution to the feature status.
type ViewOutcome struct {
	// View is the view key, "target/state/appearance".
	View string `json:"view"`
	// Result is where the view's loop ended.
	Result ViewResult `json:"result"`
	// Frozen lists the view's frozen dimensions (from its loop state).
	Frozen []string `json:"frozen,omitempty"`
	// HumanSpotcheck is the sign-off's human_spotcheck value.
	HumanSpotcheck string `json:"human_spotcheck,omitempty"`
	// Reason explains a blocked view (for example "sensor failed: ...").
	Reason string `json:"reason,omitempty"`
}

// FeatureInput is everything the feature status depends on.
type FeatureInput struct {
	// SpecErrors are spec lint's errors; any makes the feature BLOCKED.
	SpecErrors []LintError `json:"spec_errors,omitempty"`
	// NoSensor names an adapter that has no sensor ("" when there is one).
	NoSensor string `json:"no_sensor,omitempty"`
	// Views are the outcomes of every in-scope view.
	Views []ViewOutcome `json:"views"`
}

// FeatureReport is the folded status with the reasons behind it.
type FeatureReport struct {
	// Status is the folded feature status.
	Status FeatureStatus `json:"status"`
	// Reasons explain the status: blockers, pending references, or concerns.
	Reasons []string `json:"reasons"`
}

// FoldFeatureStatus folds per-view outcomes into the feature status. Precedence runs
// from the worst news down: BLOCKED (invalid spec, no sensor, any view blocked or out
// of budget, or nothing to judge), then IN_PROGRESS while any view is still running
// (a later view could still block), then NEEDS_CONTEXT, then DONE_WITH_CONCERNS, then
// DONE. Reasons list everything at the winning level, in view order.
func FoldFeatureStatus(in FeatureInput) FeatureReport {
	var blocked, pending, running, concerns []string
	for _, e := range in.SpecErrors {
		blocked = append(blocked, "spec invalid: "+e.String())
	}
	if in.NoSensor != "" {
		blocked = append(blocked, fmt.Sprintf("adapter %q has no sensor", in.NoSensor))
	}
	if len(in.SpecErrors) == 0 && in.NoSensor == "" && len(in.Views) == 0 {
		blocked = append(blocked, "no views to judge")
	}
	for _, v := range in.Views {
		switch v.Result {
		case ViewBudgetExhausted:
			// A frozen dimension that kept failing ends here, never in a sign-off
			// (LoopState.Record): name it, it is usually why the budget ran out.
			r := v.View + ": iteration budget spent without two consecutive passes"
			if len(v.Frozen) > 0 {
				r += " (frozen: " + strings.Join(v.Frozen, ", ") + ")"
			}
			blocked = append(blocked, r)
		case ViewBlocked:
			r := v.Reason
			if r == "" {
				r = "blocked"
			}
			blocked = append(blocked, v.View+": "+r)
		case ViewNeedsReference:
			pending = append(pending, v.View+": reference image awaits a human")
		case ViewInProgress:
			running = append(running, v.View+": still converging")
		case ViewSignedOff:
			for _, f := range v.Frozen {
				concerns = append(concerns, v.View+": dimension "+f+" frozen after its attempts ran out")
			}
			if d, ok := SpotcheckDimension(v.HumanSpotcheck); ok {
				concerns = append(concerns, v.View+": spot-check says the judge got "+d+" wrong")
			}
		default:
			blocked = append(blocked, fmt.Sprintf("%s: unknown view result %q", v.View, v.Result))
		}
	}
	switch {
	case len(blocked) > 0:
		return FeatureReport{Status: StatusBlocked, Reasons: blocked}
	case len(running) > 0:
		return FeatureReport{Status: StatusInProgress, Reasons: running}
	case len(pending) > 0:
		return FeatureReport{Status: StatusNeedsContext, Reasons: pending}
	case len(concerns) > 0:
		return FeatureReport{Status: StatusDoneWithConcerns, Reasons: concerns}
	}
	return FeatureReport{Status: StatusDone, Reasons: []string{}}
}
