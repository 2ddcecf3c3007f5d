package events

import (
	"fmt"
	"reflect"
)

// Kind names a judge kind. Every kind is one folder under pkg/kind and one line of the
// registry in pkg/registry; this package only names the wire value.
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
// spec, of a judge-facing gates.done and of a verdict, and the types of its typed parts.
// It is the wire contract only; what a kind does lives in its folder under pkg/kind,
// which registers it (RegisterKind).
type wireKind struct {
	spec        func(JobSpec) error
	gates       func(*GatesDone) error
	verdict     func(*VerdictEmitted) error
	parts       Parts
	jsonHolders [slots]reflect.Type
}

// wireOf is the wire schema of the kind field of an event or spec: missing and unknown
// kinds are field errors.
func wireOf(k Kind) (wireKind, error) {
	if k == "" {
		return wireKind{}, missing("kind")
	}
	w, ok := registeredWire(k)
	if !ok {
		return wireKind{}, invalid("kind", fmt.Sprintf("unsupported judge kind %q", k))
	}
	return w, nil
}

// KnownKind reports whether the wire schema has kind k.
func KnownKind(k Kind) bool {
	_, err := wireOf(k)
	return err == nil
}
