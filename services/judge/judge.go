// Package judge is the judge service: for every gates.done it asks its provider for blind
// answers (pkg/kind/<name>.Judge) and publishes verdict.emitted. It reads artifacts by
// digest and sees blind slots only; it never learns roles, paths or diffs because no
// event it reads has them.
package judge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service judges gated jobs.
type Service struct {
	env      stage.JudgeEnv
	spend    *spend.Policy
	external *external.Exchange
	// modes and batch are the judge modes (WithBatchMode).
	modes batchmode.Policy
	batch pj.Provider
	// refusedMu and refused remember the batches told their batch mode is not offered,
	// so the log says it once per batch, not once per job.
	refusedMu sync.Mutex
	refused   map[string]bool
}

// firstRefusal reports whether batch is told for the first time (of the last thousand
// batches) that its batch mode is not offered.
func (s *Service) firstRefusal(batch string) bool {
	s.refusedMu.Lock()
	defer s.refusedMu.Unlock()
	if s.refused[batch] {
		return false
	}
	if s.refused == nil || len(s.refused) >= 1000 {
		s.refused = map[string]bool{}
	}
	s.refused[batch] = true
	return true
}

// Option configures the judge service.
type Option func(*Service)

// WithSpend refuses to judge a job its tenant may not spend on (spend.Policy): a model
// the tenant may not name, more calls than the policy's cap. The job is dead-lettered
// with the reason, so the aggregator blocks it, and the provider is never asked. The
// entries check the same rules first; this is for what reaches the judge past them (an
// operator's direct submission, an event published before the rules, a rejudge). A
// policy naming no Default takes the provider's default model.
func WithSpend(p spend.Policy) Option {
	return func(s *Service) {
		if p.Default == "" && s.env.Provider != nil {
			p.Default = s.env.Provider.DefaultModel()
		}
		s.spend = &p
	}
}

// WithExternal judges the gated jobs that name the external judge (judges: [external])
// through x: a call whose answer is recorded is answered with it, any other is published
// there and its job parked (acknowledged with nothing published) until Resume. Without it
// such a job is refused, so no model ever answers a call meant for a person or an agent.
func WithExternal(x *external.Exchange) Option {
	return func(s *Service) { s.external = x }
}

// WithBatchMode judges the jobs whose mode is batch (the batch's judge_mode under the
// policy, batchmode.Policy.Mode) through batch, a batch-mode provider
// (pkg/judge/batchmode) over the same provider: the kind's judge, the answer checking,
// the cache and the events are the ones a direct call goes through. A nil batch leaves
// every job direct.
func WithBatchMode(policy batchmode.Policy, batch pj.Provider) Option {
	return func(s *Service) { s.modes, s.batch = policy, batch }
}

// New builds the judge service. Hold env.Provider to shared rate limits by wrapping it
// with pkg/judge.Limited (app.Start does, for judges and renderers alike); env.Cache, when
// set, is the judge-call cache shared by every judge instance.
func New(env stage.JudgeEnv, opts ...Option) *Service {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	env.Log = env.Log.With("service", bus.Judge, "instance", env.Instance)
	s := &Service{env: env}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	return s.handle(ctx, ev, bus.PayloadDigest(ctx))
}

// Resume runs the judge step of a job the external judge parked, from the gated event
// its published prompt recorded, now that an answer is recorded: its calls are answered
// from the exchange, and the verdict is chained to the gated event exactly as Handle's
// would have been. It returns no event while a call of the job still waits for an answer.
func (s *Service) Resume(ctx context.Context, c external.Call) ([]events.Event, error) {
	if s.external == nil {
		return nil, fmt.Errorf("resume %s: this judge service has no external judge", c.ID)
	}
	ev, digest, err := s.external.Gated(ctx, c)
	if err != nil {
		return nil, err
	}
	out, err := s.handle(ctx, ev, digest)
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", c.ID, err)
	}
	for i := range out {
		out[i].Chain = events.ChainOf(ev.Envelope, digest)
	}
	return out, nil
}

// handle judges the gated event ev, received as bytes with SHA-256 digest.
func (s *Service) handle(ctx context.Context, ev events.Event, digest string) ([]events.Event, error) {
	gd, ok := ev.Payload.(*events.GatesDone)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("judge got %s", ev.Type))
	}
	k, err := registry.Lookup(gd.Kind)
	if err != nil {
		return nil, bus.Permanent(fmt.Errorf("judge kind %q is not served by this judge: %w", gd.Kind, err))
	}
	if external.Mixed(gd.Judges) {
		return nil, bus.Permanent(fmt.Errorf("judges %v: the external judge answers alone; a panel of it and models is not offered", gd.Judges))
	}
	if s.spend != nil {
		if err := s.spend.For(ev.Tenant).CheckGates(ev.JobID, gd); err != nil {
			reason := spend.ReasonModel
			var r *spend.Refusal
			if errors.As(err, &r) {
				reason = r.Reason
			}
			telemetry.Refused(bus.Judge, reason)
			s.env.Log.WarnContext(ctx, "judging refused: not the tenant's to spend", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", reason, "err", err)
			return nil, bus.Permanent(fmt.Errorf("not judged: %w", err))
		}
	}
	ctx = pj.WithTenant(ctx, ev.Tenant)
	ctx, err = budget.WithBatch(ctx, ev.Tenant, ev.BatchID, gd.Budget)
	if err != nil {
		return nil, bus.Permanent(fmt.Errorf("job %s: %w", ev.JobID, err))
	}
	// Every call of this step is named by the gated event it answers, the same on each
	// redelivery: what keeps the batch mode from submitting a call twice.
	ctx = pj.WithScope(ctx, ev.ID)
	if s.env.Provider != nil && s.env.Provider.Name() == external.Name && !external.Named(gd.Judges) {
		// A judge whose only provider is the external one (tribunal cfn-ab-critic) has no
		// model for this job: it goes back for a judge that has one, never answered by
		// whoever answers the external prompts.
		return nil, fmt.Errorf("job %s is for a model judge and this judge service has only the external one: left for another", ev.JobID)
	}
	env := &s.env
	var job *external.Job
	if external.Named(gd.Judges) {
		if s.external == nil {
			return nil, bus.Permanent(fmt.Errorf("job %s names the external judge, which this judge service does not offer (an agent or a person answers through `tribunal cfn-ab-critic`, in the all-in-one mode)", ev.JobID))
		}
		// A person's or an agent's answer is given to one call: never cached, never
		// served to another.
		e := s.env
		e.Provider, e.Cache = s.external.Provider(), nil
		env = &e
		ctx, job = external.Begin(ctx, ev, digest)
	} else if mode, refused := s.modes.Mode(gd.JudgeMode, s.batch != nil); mode == events.JudgeModeBatch {
		e := s.env
		e.Provider = s.batch
		env = &e
	} else if refused && s.firstRefusal(ev.Tenant+"/"+ev.BatchID) {
		s.env.Log.WarnContext(ctx, "judge mode batch not offered by this deployment: the batch's jobs are judged directly", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID)
	}
	v, err := k.Judge(ctx, env, ev, gd)
	if err != nil {
		return nil, err
	}
	if job != nil {
		if err := job.Err(); err != nil {
			return nil, err
		}
		if job.Parked() {
			s.env.Log.InfoContext(ctx, "external judge: prompt published, the verdict waits for its answer", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID)
			return nil, nil
		}
	}
	return []events.Event{events.New(v, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}
