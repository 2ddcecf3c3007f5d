package argus

import (
	"fmt"
	"slices"
)

// LoopState is the convergence bookkeeping of one view, kept by the aggregator (in a
// key-value store) between iterations. Its JSON form matches the seed's state.json so a
// recorded state can be inspected with the same eyes.
type LoopState struct {
	// Feature is the feature slug.
	Feature string `json:"feature"`
	// Target identifies the view; the aggregator stores View.Key() here.
	Target string `json:"target"`
	// Iteration counts judged, confirmed and gate-failed iterations so far.
	Iteration int `json:"iteration"`
	// ConsecutivePasses is the current streak of passing iterations.
	ConsecutivePasses int `json:"consecutive_passes"`
	// Attempts counts, per dimension, the verdicts in which it failed.
	Attempts map[string]int `json:"attempts"`
	// Frozen lists dimensions that used up their attempts, in freezing order.
	Frozen []string `json:"frozen"`
	// ReferenceSource is human or candidate ("" until known).
	ReferenceSource string `json:"reference_source"`
}

// NewLoopState starts the bookkeeping of a view.
func NewLoopState(feature, target, referenceSource string) LoopState {
	return LoopState{Feature: feature, Target: target, Attempts: map[string]int{}, Frozen: []string{}, ReferenceSource: referenceSource}
}

// clone deep-copies the state so operations never alias the caller's map or slice: a
// state read from the store and the state written back must be independent values for
// compare-and-set to mean anything.
func (s LoopState) clone() LoopState {
	c := s
	c.Attempts = make(map[string]int, len(s.Attempts))
	for k, v := range s.Attempts {
		c.Attempts[k] = v
	}
	c.Frozen = append([]string{}, s.Frozen...)
	return c
}

func (s LoopState) isFrozen(dim string) bool { return slices.Contains(s.Frozen, dim) }

// LoopParams are the loop's budgets.
type LoopParams struct {
	// RequiredPasses is the streak that signs a view off.
	RequiredPasses int `json:"required_passes"`
	// MaxAttempts is how many failing verdicts a dimension gets before it is frozen.
	MaxAttempts int `json:"max_attempts"`
	// MaxIterations is the per-view iteration budget.
	MaxIterations int `json:"max_iterations"`
}

// DefaultLoopParams are the built-in rubric's budgets: 2 passes, 3 attempts, 12
// iterations.
func DefaultLoopParams() LoopParams {
	return LoopParams{RequiredPasses: DefaultConsecutivePasses, MaxAttempts: DefaultMaxAttempts, MaxIterations: DefaultMaxIterations}
}

// Override returns p with every positive field of o replacing the rubric's value, for
// a job or CLI flag that sets its own budget (for example max-iterations).
func (p LoopParams) Override(o LoopParams) LoopParams {
	if o.RequiredPasses > 0 {
		p.RequiredPasses = o.RequiredPasses
	}
	if o.MaxAttempts > 0 {
		p.MaxAttempts = o.MaxAttempts
	}
	if o.MaxIterations > 0 {
		p.MaxIterations = o.MaxIterations
	}
	return p
}

// Validate requires every budget to be at least 1.
func (p LoopParams) Validate() error {
	if p.RequiredPasses < 1 || p.MaxAttempts < 1 || p.MaxIterations < 1 {
		return fmt.Errorf("loop params %+v: every value must be at least 1", p)
	}
	return nil
}

// Decision is what the loop should do next, computed from the state and never by the
// caller counting for itself.
type Decision struct {
	// ShouldSignoff: the streak reached RequiredPasses. It takes precedence over
	// BudgetExhausted when both hold (the last allowed iteration passed).
	ShouldSignoff bool `json:"should_signoff"`
	// BudgetExhausted: Iteration reached MaxIterations without a sign-off.
	BudgetExhausted bool `json:"budget_exhausted"`
	// ConsecutivePasses and RequiredPasses show progress towards sign-off.
	ConsecutivePasses int `json:"consecutive_passes"`
	RequiredPasses    int `json:"required_passes"`
	// Iteration and MaxIterations show how much budget is used.
	Iteration     int `json:"iteration"`
	MaxIterations int `json:"max_iterations"`
	// Frozen lists every frozen dimension.
	Frozen []string `json:"frozen"`
	// NewlyFrozen lists the dimensions this step froze, the ones to document now.
	NewlyFrozen []string `json:"newly_frozen"`
	// FixDimensions are the failed dimensions the implementer should work on: the
	// verdict's failures minus frozen ones. Empty after a pass, a confirm or a gate
	// failure (a gate failure's work items are the failing gates), and after a verdict
	// whose only failures are frozen (which still resets the streak).
	FixDimensions []string `json:"fix_dimensions"`
}

// Decide reports the decision for a state as it stands, with no new step.
func (s LoopState) Decide(p LoopParams) Decision {
	return s.decide(p, nil, nil)
}

func (s LoopState) decide(p LoopParams, newlyFrozen, fix []string) Decision {
	if newlyFrozen == nil {
		newlyFrozen = []string{}
	}
	if fix == nil {
		fix = []string{}
	}
	return Decision{
		ShouldSignoff:     s.ConsecutivePasses >= p.RequiredPasses,
		BudgetExhausted:   s.Iteration >= p.MaxIterations,
		ConsecutivePasses: s.ConsecutivePasses,
		RequiredPasses:    p.RequiredPasses,
		Iteration:         s.Iteration,
		MaxIterations:     p.MaxIterations,
		Frozen:            append([]string{}, s.Frozen...),
		NewlyFrozen:       newlyFrozen,
		FixDimensions:     fix,
	}
}

// Record applies a judge verdict, which must already be normalized (NormalizeVerdict):
// only its AllPass and FailedDimensions are read. It follows the seed's loop_state.py
// `record`: an all-pass verdict extends the streak; any other verdict resets it, and
// each failed dimension uses one attempt and is frozen when its attempts reach
// MaxAttempts. Freezing only takes a dimension off the fix list (the loop stops asking
// the builder to fix it); it never turns a failing verdict into a pass. A view whose
// frozen dimension keeps failing therefore runs out its budget and ends blocked, while a
// view that signs off after a dimension froze (the dimension passed again later) is the
// seed's DONE_WITH_CONCERNS. So FixDimensions can be empty after a failing verdict: the
// builder has nothing left to try, and the streak still did not grow.
func (s LoopState) Record(v Verdict, p LoopParams) (LoopState, Decision) {
	n := s.clone()
	n.Iteration++
	if n.ReferenceSource == "" && v.ReferenceSource != "" {
		n.ReferenceSource = v.ReferenceSource
	}
	newly := []string{}
	fix := []string{}
	if v.AllPass && len(v.FailedDimensions) == 0 {
		n.ConsecutivePasses++
		return n, n.decide(p, newly, fix)
	}
	n.ConsecutivePasses = 0
	for _, dim := range v.FailedDimensions {
		n.Attempts[dim]++
		if n.Attempts[dim] >= p.MaxAttempts && !n.isFrozen(dim) {
			n.Frozen = append(n.Frozen, dim)
			newly = append(newly, dim)
		}
	}
	seen := map[string]bool{}
	for _, dim := range v.FailedDimensions {
		if !n.isFrozen(dim) && !seen[dim] {
			seen[dim] = true
			fix = append(fix, dim)
		}
	}
	return n, n.decide(p, newly, fix)
}

// Unchanged records a confirm without a judge: the render did not change since the
// previous iteration. After a passing iteration that is as good as the same verdict
// again, so it extends the streak (typically supplying the second pass). With no
// streak to extend (the previous iteration failed or nothing was judged yet) an
// unchanged render is still failing: the iteration is spent and the streak stays 0,
// so a loop that stops making changes still runs into its budget.
func (s LoopState) Unchanged(p LoopParams) (LoopState, Decision) {
	n := s.clone()
	n.Iteration++
	if n.ConsecutivePasses > 0 {
		n.ConsecutivePasses++
	}
	return n, n.decide(p, nil, nil)
}

// GateFail records an iteration whose deterministic gates were red (or whose sensor
// failed): the judge was not asked, the iteration is spent and the streak resets,
// because two passes must be consecutive iterations with a green floor.
func (s LoopState) GateFail(p LoopParams) (LoopState, Decision) {
	n := s.clone()
	n.Iteration++
	n.ConsecutivePasses = 0
	return n, n.decide(p, nil, nil)
}
