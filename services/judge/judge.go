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

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service judges gated jobs.
type Service struct {
	env   kind.JudgeEnv
	spend *spend.Policy
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

// New builds the judge service. Hold env.Provider to shared rate limits by wrapping it
// with pkg/judge.Limited (app.Start does, for judges and renderers alike); env.Cache, when
// set, is the judge-call cache shared by every judge instance.
func New(env kind.JudgeEnv, opts ...Option) *Service {
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
	gd, ok := ev.Payload.(*events.GatesDone)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("judge got %s", ev.Type))
	}
	k, err := kinds.Lookup(gd.Kind)
	if err != nil {
		return nil, bus.Permanent(fmt.Errorf("judge kind %q is not served by this judge: %w", gd.Kind, err))
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
	v, err := k.Judge(ctx, &s.env, ev, gd)
	if err != nil {
		return nil, err
	}
	return []events.Event{events.New(v, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}
