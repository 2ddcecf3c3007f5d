// Package events defines every event tribunal's services exchange, their msgpack wire
// form, deterministic ids and subjects.
//
// Events are plain structs. Each travels inside an Envelope that says who it belongs to
// (tenant, batch, job, iteration) and why it exists (causation and correlation ids). The
// wire form carries a schema version so an old service meeting a newer event fails loudly
// with a typed error instead of misreading it.
//
// Judge-facing events (GatesDone) carry no field that can hold a role label, a file path
// or a diff: slots A and B, blob digests, media types and the criterion text only.
package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ident"
)

// SchemaVersion is the wire schema this build writes and the only one it reads.
const SchemaVersion = 1

// Type names an event; it is also the last part of its subject.
type Type string

// The event types of the flow in docs/architecture.md.
const (
	TypeJobSubmitted     Type = "job.submitted"
	TypeRenderRequested  Type = "render.requested"
	TypeRenderDone       Type = "render.done"
	TypeGatesDone        Type = "gates.done"
	TypeGatesFailed      Type = "gates.failed"
	TypeVerdictEmitted   Type = "verdict.emitted"
	TypeIterationDecided Type = "iteration.decided"
	TypeSignoffRecorded  Type = "signoff.recorded"
	TypeManifestEmitted  Type = "manifest.emitted"
	TypeJobBlocked       Type = "job.blocked"
	TypeBatchCompleted   Type = "batch.completed"
	// TypeRenderUnchanged confirms a passing rubric view without a judge call.
	TypeRenderUnchanged Type = "render.unchanged"
	// TypeSpotcheckRecorded is a person's spot-check of a sign-off (HE-2).
	TypeSpotcheckRecorded Type = "spotcheck.recorded"
	// TypeViewReset is an operator's reset of a rubric view's loop: the next step starts
	// a new loop with a fresh budget.
	TypeViewReset Type = "view.reset"
	// TypeBatchOpened announces a batch before its first job: its size and its plan (every
	// job's id), so the batch can be cancelled as a whole, never-submitted jobs included.
	TypeBatchOpened Type = "batch.opened"
	// TypeBatchCancelRequested asks the aggregator to end a batch: every unfinished job is
	// blocked as cancelled. The client publishes page 0; the aggregator continues page by
	// page through the batch's plan.
	TypeBatchCancelRequested Type = "batch.cancel.requested"
	// TypeJobCancelRequested cancels one job of a cancelled batch; the aggregator
	// publishes one per job of its plan and applies each like any other input of the job.
	TypeJobCancelRequested Type = "job.cancel.requested"
)

// AllTypes lists every event type, in flow order.
var AllTypes = []Type{
	TypeJobSubmitted, TypeRenderRequested, TypeRenderDone, TypeGatesDone, TypeGatesFailed,
	TypeVerdictEmitted, TypeIterationDecided, TypeSignoffRecorded, TypeManifestEmitted,
	TypeJobBlocked, TypeBatchCompleted, TypeRenderUnchanged, TypeSpotcheckRecorded, TypeViewReset,
	TypeBatchOpened, TypeBatchCancelRequested, TypeJobCancelRequested, TypeReviewRecorded,
}

// Known reports whether t is an event type this build understands.
func (t Type) Known() bool { return slices.Contains(AllTypes, t) }

// Envelope is the header every event carries.
type Envelope struct {
	// ID is deterministic for a logical step (see NewID) so a redelivered handler that
	// publishes again produces the same id and JetStream drops the copy.
	ID            string
	Type          Type
	SchemaVersion int
	Tenant        string
	BatchID       string
	// JobID names one AC within its batch.
	JobID     string
	Iteration int
	Time      time.Time
	// CausationID is the id of the event this one was derived from.
	CausationID string
	// CorrelationID ties every event of one job together (one AC = one correlation).
	CorrelationID string
	// Attempt counts redrives of the job: 0 for the first pass; `tribunal redrive` sends
	// blocked jobs through again as attempt 1, 2, ... Every event derived from an
	// attempt carries it, so each attempt's events have ids of their own.
	Attempt int
	// Rejudge names the judge model of a `tribunal rejudge`: the stored gated artifacts
	// judged again by another model, whose verdicts stand next to the original ones and
	// never replace a decision. Derived events carry it too.
	Rejudge string
	// Chain links the upstream events this one was derived from, oldest first, as
	// "<event id>:<sha256 of its wire bytes>" (see ChainOf): the stages between the
	// aggregator's render request and its decision (renderer, gater, judge) set it on
	// their outputs, so render.done carries render.requested's link, gates.done those
	// of render.requested and render.done, and verdict.emitted those and gates.done's.
	// The aggregator chains a decision's inputs in the job record, so a manifest's or a
	// sign-off's digest covers every event the decision rests on. Empty on the
	// aggregator's own events, on clients' events and on events written before chains
	// existed (it is an optional wire field).
	Chain []string
}

// MaxChain bounds Envelope.Chain: a chain grows by one link per pipeline stage and the
// aggregator starts none, so a longer one is not a chain tribunal wrote.
const MaxChain = 16

// Link is an event's link of a digest chain: its id and the SHA-256 of its wire bytes.
func Link(id, sha256Hex string) string { return id + ":" + sha256Hex }

// ParseLink splits a digest-chain link into the event id and the hex SHA-256 of the
// event's wire bytes; ok is false when l is not a well-formed link.
func ParseLink(l string) (id, sha256Hex string, ok bool) {
	i := strings.LastIndexByte(l, ':')
	if i < 0 {
		return "", "", false
	}
	id, sha256Hex = l[:i], l[i+1:]
	return id, sha256Hex, ident.Name(id) && ident.HexDigest(sha256Hex)
}

// ChainOf is the chain of an event derived from cause, whose wire bytes hash to
// sha256Hex: cause's own chain followed by cause's link.
func ChainOf(cause Envelope, sha256Hex string) []string {
	out := make([]string, 0, len(cause.Chain)+1)
	return append(append(out, cause.Chain...), Link(cause.ID, sha256Hex))
}

// Payload is implemented by every event body.
type Payload interface {
	// EventType is the type the payload travels as.
	EventType() Type
	// Validate reports the first missing or malformed field as a *FieldError.
	Validate() error
}

// Event is an envelope with its decoded payload.
type Event struct {
	Envelope
	Payload Payload
}

// NewID derives the deterministic id of a logical step: the same (type, tenant, batch,
// job, iteration, step) always yields the same id. step distinguishes several events of
// one type for one job iteration (for example the two calls of a position swap).
func NewID(t Type, tenant, batch, job string, iteration int, step string) string {
	h := sha256.New()
	for _, part := range []string{string(t), tenant, batch, job, strconv.Itoa(iteration), step} {
		h.Write([]byte(part))
		h.Write([]byte{0x1f})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// New builds an event for payload p with a deterministic id. The causing event, when
// given, supplies the causation and correlation ids.
func New(p Payload, tenant, batch, job string, iteration int, step string, cause *Envelope) Event {
	attempt, rejudge := 0, ""
	if cause != nil {
		attempt, rejudge = cause.Attempt, cause.Rejudge
	}
	if rejudge != "" {
		e := NewAttempt(p, tenant, batch, job, iteration, step+"@rejudge:"+rejudge, attempt, cause)
		e.Rejudge = rejudge
		return e
	}
	return NewAttempt(p, tenant, batch, job, iteration, step, attempt, cause)
}

// AttemptStep is the step name of an event of a redrive attempt: attempt 0 keeps the
// step as it is, so first-pass ids never change.
func AttemptStep(step string, attempt int) string {
	if attempt == 0 {
		return step
	}
	return step + "@attempt" + strconv.Itoa(attempt)
}

// NewAttempt is New for an explicit redrive attempt.
func NewAttempt(p Payload, tenant, batch, job string, iteration int, step string, attempt int, cause *Envelope) Event {
	env := Envelope{
		ID:            NewID(p.EventType(), tenant, batch, job, iteration, AttemptStep(step, attempt)),
		Attempt:       attempt,
		Type:          p.EventType(),
		SchemaVersion: SchemaVersion,
		Tenant:        tenant,
		BatchID:       batch,
		JobID:         job,
		Iteration:     iteration,
		Time:          time.Now().UTC(),
	}
	if cause != nil {
		env.CausationID = cause.ID
		env.CorrelationID = cause.CorrelationID
	}
	if env.CorrelationID == "" {
		env.CorrelationID = CorrelationFor(tenant, batch, job)
	}
	return Event{Envelope: env, Payload: p}
}

// CorrelationFor is the correlation id of every event of one job.
func CorrelationFor(tenant, batch, job string) string {
	return NewID("job", tenant, batch, job, 0, "correlation")
}

// JobKey is a stable, human-readable identity of a job across tenants and batches.
func JobKey(tenant, batch, job string) string {
	return strings.Join([]string{tenant, batch, job}, "/")
}

// Validate checks the envelope's own fields.
func (e Envelope) Validate() error {
	switch {
	case e.ID == "":
		return missing("envelope.id")
	case !e.Type.Known():
		return &FieldError{Doc: docEvent, Field: "envelope.type", Reason: fmt.Sprintf("unknown event type %q", e.Type), Err: ErrUnknownType}
	case e.Tenant == "":
		return missing("envelope.tenant")
	}
	if err := ValidateTenant(e.Tenant); err != nil {
		return &FieldError{Doc: docEvent, Field: "envelope.tenant", Reason: err.Error(), Err: ErrInvalidField}
	}
	if e.BatchID == "" {
		return missing("envelope.batch_id")
	}
	if err := ValidateName(e.BatchID); err != nil {
		return &FieldError{Doc: docEvent, Field: "envelope.batch_id", Reason: err.Error(), Err: ErrInvalidField}
	}
	if e.JobID != "" {
		if err := ValidateName(e.JobID); err != nil {
			return &FieldError{Doc: docEvent, Field: "envelope.job_id", Reason: err.Error(), Err: ErrInvalidField}
		}
	}
	if e.Iteration < 0 {
		return &FieldError{Doc: docEvent, Field: "envelope.iteration", Reason: "negative", Err: ErrInvalidField}
	}
	if e.Attempt < 0 {
		return &FieldError{Doc: docEvent, Field: "envelope.attempt", Reason: "negative", Err: ErrInvalidField}
	}
	if len(e.Chain) > MaxChain {
		return &FieldError{Doc: docEvent, Field: "envelope.chain", Reason: fmt.Sprintf("%d links, at most %d", len(e.Chain), MaxChain), Err: ErrInvalidField}
	}
	for i, l := range e.Chain {
		if _, _, ok := ParseLink(l); !ok {
			return &FieldError{Doc: docEvent, Field: fmt.Sprintf("envelope.chain[%d]", i), Reason: fmt.Sprintf("want <event id>:<64 lowercase hex characters>, got %q", l), Err: ErrInvalidField}
		}
	}
	return nil
}
