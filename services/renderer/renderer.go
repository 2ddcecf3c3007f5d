// Package renderer is the renderer service: it turns render.requested into render.done by
// running the job's kind's sensor (pkg/kind/<name>.Render) and storing what it produced in
// blob storage.
package renderer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service renders jobs.
type Service struct {
	env   stage.RenderEnv
	log   *slog.Logger
	spend *spend.Policy
}

// Option configures the renderer.
type Option func(*Service)

// WithSpend blocks, before any work, a job its tenant may not spend on (spend.Policy):
// an equivalence runner model, which the renderer itself would ask, or a judge panel the
// judge service would refuse, so nothing is rendered for a job that cannot be judged. A
// policy naming no Default takes the provider's default model.
func WithSpend(p spend.Policy) Option {
	return func(s *Service) {
		if p.Default == "" && s.env.Provider != nil {
			p.Default = s.env.Provider.DefaultModel()
		}
		s.spend = &p
	}
}

// New builds the renderer. env.Fetcher defaults to one with fetch's limits.
func New(store blob.Store, fetch artifact.FetchOptions, env stage.RenderEnv, opts ...Option) *Service {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	env.Log = env.Log.With("service", bus.Renderer)
	env.Store = store
	if env.Fetcher == nil {
		env.Fetcher = artifact.NewFetcher(fetch)
	}
	s := &Service{env: env, log: env.Log}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	req, ok := ev.Payload.(*events.RenderRequested)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("renderer got %s", ev.Type))
	}
	done := &events.RenderDone{Spec: req.Spec, Blocked: fmt.Sprintf("no sensor for judge kind %q", req.Spec.Kind)}
	var refused *spend.Refusal
	if s.spend != nil {
		if rs := s.spend.For(ev.Tenant).Check(req.Spec); len(rs) > 0 {
			refused = rs[0]
		}
	}
	if req.Spec.Problem != "" {
		// The AC's entry is at fault, not one of its artifacts: its reason as it is.
		done.Blocked = req.Spec.Problem
	} else if refused != nil {
		telemetry.Refused(bus.Renderer, refused.Reason)
		done.Blocked = "not judged: " + refused.Error()
	} else if k, err := registry.Lookup(req.Spec.Kind); err == nil {
		// An equivalence runner's calls are the batch's spending too.
		bctx, berr := budget.WithBatch(ctx, ev.Tenant, ev.BatchID, req.Spec.Budget)
		if berr != nil {
			return nil, bus.Permanent(fmt.Errorf("job %s: %w", ev.JobID, berr))
		}
		if done, err = k.Render(bctx, &s.env, ev, req.Spec); err != nil {
			return nil, err
		}
	}
	if done.Blocked != "" {
		s.log.InfoContext(ctx, "render blocked", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", done.Blocked)
	}
	return []events.Event{events.New(done, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}
