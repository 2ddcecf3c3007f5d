package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// Refusal reasons: fixed words, the label of tribunal_refusals_total{service="ingress"}.
const (
	RefusedMalformed = "malformed"       // the event does not decode or validate
	RefusedType      = "type"            // a type a team may not publish
	RefusedTenant    = "tenant"          // an envelope of another tenant than the token's
	RefusedID        = "id"              // an id that is not the one the ingress derives
	RefusedEnvelope  = "envelope"        // an envelope field a team may not set
	RefusedBlob      = "blob"            // a referenced blob the tenant has not stored, or stored otherwise
	RefusedJob       = "job"             // a spot-check of a job the tenant has not submitted
	RefusedTooLarge  = "too_large"       // more events than one request may carry
	RefusedAnswer    = "answer"          // a review answer outside its item's kind's contract, or of no item
	RefusedUnauth    = "unauthenticated" // no token, or an unknown one
	RefusedOperator  = "operator_token"  // an operator's token ("*"), which the ingress refuses
	RefusedRole      = "role"            // a token whose role may not use the endpoint (a reviewer's, Routes)
	// A job naming a model the team may not name, or a panel making more calls than the
	// cap, is refused with pkg/spend's reasons, the words the judge service counts too.
	RefusedModel = spend.ReasonModel
	RefusedCalls = spend.ReasonCalls
)

// teamEvent says how the ingress rebuilds one type a team may publish: from the decoded
// payload and the token's tenant, never from the client's id or envelope.
type teamEvent func(ctx context.Context, a *admission, ev events.Event) (events.Event, error)

// teamEvents are the only types a team may publish. Every other event is a service's
// (a verdict, a decision, a completion), and a team that could publish one could decide
// its own batch or another team's.
var teamEvents = map[events.Type]teamEvent{
	events.TypeJobSubmitted: func(ctx context.Context, a *admission, ev events.Event) (events.Event, error) {
		p := ev.Payload.(*events.JobSubmitted)
		if p.Spec.ACID != ev.JobID {
			return events.Event{}, a.field(RefusedMalformed, "spec.ac_id", p.Spec.ACID, fmt.Sprintf("differs from the envelope's job %q", ev.JobID))
		}
		// What the team may spend comes before any look at the store: it needs none.
		if rs := a.spend.Check(p.Spec); len(rs) > 0 {
			return events.Event{}, a.field(rs[0].Reason, "spec."+rs[0].Field, rs[0].Value(), rs[0].What())
		}
		if err := a.checkBlobs(ctx, p); err != nil {
			return events.Event{}, err
		}
		return client.SubmittedEvent(a.tenant, ev.BatchID, ev.JobID, ev.Iteration, p), nil
	},
	events.TypeSpotcheckRecorded: func(ctx context.Context, a *admission, ev events.Event) (events.Event, error) {
		p := ev.Payload.(*events.SpotcheckRecorded)
		if ev.JobID != "" && ev.JobID != p.ACID {
			return events.Event{}, a.field(RefusedMalformed, "ac_id", p.ACID, fmt.Sprintf("differs from the envelope's job %q", ev.JobID))
		}
		if err := a.submitted(ctx, ev.BatchID, p.ACID); err != nil {
			return events.Event{}, err
		}
		return client.SpotcheckEvent(a.tenant, ev.BatchID, p), nil
	},
	events.TypeBatchOpened: func(ctx context.Context, a *admission, ev events.Event) (events.Event, error) {
		p := ev.Payload.(*events.BatchOpened)
		if ev.JobID != "" {
			return events.Event{}, a.field(RefusedEnvelope, "envelope.job_id", ev.JobID, "batch.opened is the batch's, no job's")
		}
		// The plan's pages are blobs the aggregator reads to cancel the batch: the
		// tenant's own.
		if err := a.checkBlobs(ctx, p); err != nil {
			return events.Event{}, err
		}
		return client.OpenedEvent(a.tenant, ev.BatchID, p), nil
	},
	events.TypeBatchCancelRequested: func(_ context.Context, a *admission, ev events.Event) (events.Event, error) {
		p := ev.Payload.(*events.BatchCancelRequested)
		if p.Page != 0 {
			return events.Event{}, a.field(RefusedEnvelope, "page", fmt.Sprint(p.Page), "a team asks for page 0; the aggregator continues through the plan")
		}
		return client.CancelEvent(a.tenant, ev.BatchID, p), nil
	},
	events.TypeReviewRecorded: func(ctx context.Context, a *admission, ev events.Event) (events.Event, error) {
		p := ev.Payload.(*events.ReviewRecorded)
		if p.By != a.who {
			return events.Event{}, a.field(RefusedEnvelope, "by", p.By, fmt.Sprintf("a review through the ingress is by its token's holder, %q (ingress.Reviewer)", a.who))
		}
		if err := a.submitted(ctx, ev.BatchID, ev.JobID); err != nil {
			return events.Event{}, err
		}
		// Who reviewed is the token's, never the event's own claim; the rules check the
		// answer against the kind's contract and the job when they apply it.
		rp := &events.ReviewRecorded{Kind: p.Kind, Answer: p.Answer, By: a.who, Via: "ingress", Case: p.Case}
		out := events.NewAttempt(rp, a.tenant, ev.BatchID, ev.JobID, ev.Iteration, rp.Step(), ev.Attempt, nil)
		return out, nil
	},
	events.TypeViewReset: func(ctx context.Context, a *admission, ev events.Event) (events.Event, error) {
		p := ev.Payload.(*events.ViewReset)
		if ev.JobID != p.ACID {
			return events.Event{}, a.field(RefusedMalformed, "ac_id", p.ACID, fmt.Sprintf("differs from the envelope's job %q", ev.JobID))
		}
		if err := a.submitted(ctx, ev.BatchID, p.ACID); err != nil {
			return events.Event{}, err
		}
		return client.ResetEvent(a.tenant, ev.BatchID, p), nil
	},
}

// submitted refuses an event about a job the tenant has not submitted in batch.
func (a *admission) submitted(ctx context.Context, batch, job string) error {
	if a.jobs == nil {
		return nil
	}
	if _, _, err := a.jobs.Job(ctx, a.tenant, batch, job); errors.Is(err, records.ErrNotRecorded) {
		return a.field(RefusedJob, "ac_id", job, fmt.Sprintf("batch %s of tenant %s has no such job", batch, a.tenant))
	} else if err != nil {
		return err
	}
	return nil
}

// TeamTypes lists the event types a team may publish through the ingress, the subjects
// `tribunal tenants` lets the ingress's NATS user publish.
func TeamTypes() []events.Type {
	var out []events.Type
	for _, t := range events.AllTypes {
		if teamEvents[t] != nil {
			out = append(out, t)
		}
	}
	return out
}

// admission checks one event of one request.
type admission struct {
	tenant string
	store  blob.Store
	jobs   *records.Store
	// spend is what the tenant may spend on the provider.
	spend spend.Allowance
	// refusal is filled by field for the event under check.
	refusal *Refusal
	// who names the person behind the request's token (reviewerOf), whom a review
	// recorded through the ingress is by, whatever the event says.
	who string
}

// refused is an event the ingress will not publish.
type refused struct{ r Refusal }

func (e *refused) Error() string { return e.r.Message }

// field refuses the event under check for one field.
func (a *admission) field(reason, field, value, why string) error {
	return a.fieldErr(reason, &fielderr.Error{Doc: a.refusal.Type, Field: field, Value: value, Reason: why})
}

func (a *admission) fieldErr(reason string, fe *fielderr.Error) error {
	a.refusal.Field, a.refusal.Reason, a.refusal.Message = fe.Field, reason, fe.Error()
	return &refused{*a.refusal}
}

// admit decodes and checks one event of a request and returns it as the ingress will
// publish it: its envelope rebuilt under the token's tenant, its id derived, its time the
// ingress's. A refusal is a *refused; any other error is the ingress's own failure.
func (a *admission) admit(ctx context.Context, index int, data []byte) (events.Event, error) {
	a.refusal = &Refusal{Index: index}
	ev, err := events.Decode(data)
	if err != nil {
		var fe *fielderr.Error
		if errors.As(err, &fe) {
			if events.Type(fe.Doc).Known() {
				a.refusal.Type = fe.Doc
			}
			return events.Event{}, a.fieldErr(RefusedMalformed, fe)
		}
		return events.Event{}, a.field(RefusedMalformed, "envelope", "", err.Error())
	}
	a.refusal.Type, a.refusal.AC = string(ev.Type), ev.JobID
	rebuild := teamEvents[ev.Type]
	switch {
	case rebuild == nil:
		return events.Event{}, a.field(RefusedType, "envelope.type", string(ev.Type), "a team may publish only "+typeList())
	case ev.Tenant != a.tenant:
		return events.Event{}, a.field(RefusedTenant, "envelope.tenant", ev.Tenant, fmt.Sprintf("the token is tenant %q's", a.tenant))
	case ev.Attempt != 0:
		return events.Event{}, a.field(RefusedEnvelope, "envelope.attempt", fmt.Sprint(ev.Attempt), "redrive attempts are an operator's (tribunal redrive)")
	case ev.Rejudge != "":
		return events.Event{}, a.field(RefusedEnvelope, "envelope.rejudge", ev.Rejudge, "rejudging is an operator's (tribunal rejudge)")
	}
	out, err := rebuild(ctx, a, ev)
	if err != nil {
		return events.Event{}, err
	}
	if ev.ID != out.ID {
		return events.Event{}, a.field(RefusedID, "envelope.id", ev.ID, fmt.Sprintf("the id of this event is %s", out.ID))
	}
	return out, nil
}

// checkBlobs refuses a payload that references a blob its tenant has not stored, or
// describes one otherwise than it is stored (size, media type): a team may only point
// the services at its own artifacts.
func (a *admission) checkBlobs(ctx context.Context, p events.Payload) error {
	for _, f := range events.Blobs(p) {
		if f.Blob.SHA256 == "" {
			continue // an unset blob of a spec that needs none (a blocked feature)
		}
		attrs, err := a.store.Stat(ctx, blob.Ref{Tenant: a.tenant, SHA256: f.Blob.SHA256})
		switch {
		case errors.Is(err, blob.ErrNotFound), errors.Is(err, blob.ErrInvalidRef):
			return a.field(RefusedBlob, f.Field+".sha256", f.Blob.SHA256, fmt.Sprintf("tenant %s has stored no such blob (PUT %s first)", a.tenant, PathBlobs))
		case err != nil:
			return fmt.Errorf("stat %s of %s: %w", f.Field, a.refusal.AC, err)
		case attrs.Size != f.Blob.Size:
			return a.field(RefusedBlob, f.Field+".size", fmt.Sprint(f.Blob.Size), fmt.Sprintf("the blob has %d bytes", attrs.Size))
		case attrs.MediaType != f.Blob.MediaType:
			return a.field(RefusedBlob, f.Field+".media_type", f.Blob.MediaType, fmt.Sprintf("the blob is stored as %s", attrs.MediaType))
		}
	}
	return nil
}

func typeList() string {
	s := ""
	for i, t := range TeamTypes() {
		if i > 0 {
			s += ", "
		}
		s += string(t)
	}
	return s
}

// reviewerOf names the person behind a request (Reviewer).
func reviewerOf(r *http.Request, tenant string) string {
	tok, _, _ := tokens.Bearer(r)
	return Reviewer(tenant, tok)
}

// Reviewer names the holder of a team's (or a reviewer's) token as the reviews they
// record name them, through the ingress or a shared console alike (tokens.Reviewer).
func Reviewer(tenant, token string) string { return tokens.Reviewer(tenant, token) }
