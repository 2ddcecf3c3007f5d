package events

import "fmt"

// Kind names a judge kind. Every kind is one folder under pkg/kind and one line of the
// registry in pkg/kinds; this package only names the wire value.
type Kind string

// The judge kinds tribunal ships.
const (
	KindAB          Kind = "ab"
	KindRubric      Kind = "rubric"
	KindEquivalence Kind = "equivalence"
	KindCritic      Kind = "critic"
)

// String implements fmt.Stringer.
func (k Kind) String() string { return string(k) }

// Status is a job's lifecycle status: pending until the job has its outcome, then one of
// the final statuses. It travels in iteration.decided and is kept on the job record.
type Status string

// Job statuses. Everything but pending and awaiting_spotcheck is final.
const (
	StatusPending         Status = "pending"
	StatusCompared        Status = "compared"
	StatusBlocked         Status = "blocked"
	StatusSchemaViolation Status = "schema_violation"
	// Rubric view outcomes.
	StatusSignedOff         Status = "signed_off"
	StatusNeedsFixes        Status = "needs_fixes"
	StatusBudgetExhausted   Status = "budget_exhausted"
	StatusNeedsContext      Status = "needs_context"
	StatusReported          Status = "reported"
	StatusAwaitingSpotcheck Status = "awaiting_spotcheck"
)

// Final reports whether a job with this status has its outcome.
func (s Status) Final() bool {
	return s != "" && s != StatusPending && s != StatusAwaitingSpotcheck
}

// VoteStatus is how a judge call ended.
type VoteStatus string

// Vote statuses.
const (
	// VoteOK is a valid answer.
	VoteOK VoteStatus = "ok"
	// VoteSchemaViolation is an answer that stayed invalid after the repair re-ask.
	VoteSchemaViolation VoteStatus = "schema_violation"
	// VoteUnavailable is a provider that could not answer: the job is blocked.
	VoteUnavailable VoteStatus = "unavailable"
	// VoteBlocked is input the judge refused to send (for example an unreadable transcript).
	VoteBlocked VoteStatus = "blocked"
)

// GateStatus is one deterministic gate's outcome.
type GateStatus string

// Gate statuses.
const (
	GatePass GateStatus = "pass"
	GateFail GateStatus = "fail"
	GateSkip GateStatus = "skip"
	// GateDiff is a snapshot that differs from its baseline (reported, not failing).
	GateDiff GateStatus = "diff"
)

// Failed reports whether the gate stops the job from reaching a judge.
func (s GateStatus) Failed() bool { return s == GateFail }

// FailedGates lists the failing gates of a set, "name (detail)" each.
func FailedGates(gates []Gate) string {
	msg := "gates failed:"
	for _, g := range gates {
		if g.Status.Failed() {
			msg += fmt.Sprintf(" %s (%s)", g.Name, g.Detail)
		}
	}
	return msg
}

// wireKind is what the wire schema knows of one judge kind: how to check its part of a job
// spec, of a judge-facing gates.done and of a verdict. It is the wire contract only; what
// a kind does lives in its folder under pkg/kind.
type wireKind struct {
	spec    func(JobSpec) error
	gates   func(*GatesDone) error
	verdict func(*VerdictEmitted) error
}

// wireKinds is the wire schema's table of kinds. Adding a judge kind adds its structs to
// this package and a line here (docs/adding-a-kind.md).
var wireKinds = map[Kind]wireKind{
	KindAB: {
		spec: func(s JobSpec) error { return s.AB.validate() },
		gates: func(p *GatesDone) error {
			if len(p.Slots) != 2 || p.Slots[0].Name != "A" || p.Slots[1].Name != "B" {
				return invalid("slots", "ab needs exactly slots A and B in that order")
			}
			return p.AutoSwap.validate("auto_swap")
		},
		verdict: validateABVotes,
	},
	KindCritic: {
		spec: func(s JobSpec) error { return s.Critic.validate() },
		gates: func(p *GatesDone) error {
			if len(p.Slots) != 1 || p.Slots[0].Name != "output" {
				return invalid("slots", "critic needs exactly one slot named output")
			}
			return nil
		},
		verdict: func(p *VerdictEmitted) error {
			if p.Critic == nil {
				return missing("critic")
			}
			for i, t := range p.CriticTrials {
				if err := validStatus(fmt.Sprintf("critic_trials[%d].status", i), t.Status); err != nil {
					return err
				}
			}
			return validStatus("critic.status", p.Critic.Status)
		},
	},
	KindEquivalence: {
		spec: func(s JobSpec) error { return s.Equivalence.validate() },
		gates: func(p *GatesDone) error {
			if len(p.Cases) == 0 {
				return missing("cases")
			}
			for i, c := range p.Cases {
				if err := c.Original.validate(fmt.Sprintf("cases[%d].original", i)); err != nil {
					return err
				}
				if err := c.Candidate.validate(fmt.Sprintf("cases[%d].candidate", i)); err != nil {
					return err
				}
			}
			return nil
		},
		verdict: func(p *VerdictEmitted) error {
			if len(p.Cases) == 0 {
				return missing("cases")
			}
			for i, c := range p.Cases {
				if c.CaseID == "" {
					return missing(fmt.Sprintf("cases[%d].case_id", i))
				}
				if err := validStatus(fmt.Sprintf("cases[%d].status", i), c.Status); err != nil {
					return err
				}
			}
			return nil
		},
	},
	KindRubric: {
		spec:  func(s JobSpec) error { return s.Rubric.validate() },
		gates: func(*GatesDone) error { return nil },
		verdict: func(p *VerdictEmitted) error {
			if p.Rubric == nil {
				return missing("rubric")
			}
			return validStatus("rubric.status", p.Rubric.Status)
		},
	},
}

// wireOf is the wire schema of the kind field of an event or spec: missing and unknown
// kinds are field errors.
func wireOf(k Kind) (wireKind, error) {
	if k == "" {
		return wireKind{}, missing("kind")
	}
	w, ok := wireKinds[k]
	if !ok {
		if w, ok = registeredWire(k); !ok {
			return wireKind{}, invalid("kind", fmt.Sprintf("unsupported judge kind %q", k))
		}
	}
	return w, nil
}

// KnownKind reports whether the wire schema has kind k.
func KnownKind(k Kind) bool {
	_, err := wireOf(k)
	return err == nil
}

func validateABVotes(p *VerdictEmitted) error {
	if len(p.Votes) == 0 {
		return missing("votes")
	}
	for i, v := range p.Votes {
		f := fmt.Sprintf("votes[%d]", i)
		if v.Judge.Provider == "" {
			return missing(f + ".judge.provider")
		}
		switch v.Order {
		case "AB", "BA":
		default:
			return invalid(f+".order", fmt.Sprintf("want AB or BA, got %q", v.Order))
		}
		if err := validStatus(f+".status", v.Status); err != nil {
			return err
		}
	}
	return nil
}
