// Package renderer is the renderer service: it turns render.requested into render.done by
// running the job's kind's sensor (pkg/kind/<name>.Render) and storing what it produced in
// blob storage.
package renderer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingest"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
)

// Service renders jobs.
type Service struct {
	env kind.RenderEnv
	log *slog.Logger
}

// New builds the renderer. env.Fetcher defaults to one with fetch's limits.
func New(store blob.Store, fetch ingest.FetchOptions, env kind.RenderEnv) *Service {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	env.Log = env.Log.With("service", bus.Renderer)
	env.Store = store
	if env.Fetcher == nil {
		env.Fetcher = ingest.NewFetcher(fetch)
	}
	return &Service{env: env, log: env.Log}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	req, ok := ev.Payload.(*events.RenderRequested)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("renderer got %s", ev.Type))
	}
	done := &events.RenderDone{Spec: req.Spec, Blocked: fmt.Sprintf("no sensor for judge kind %q", req.Spec.Kind)}
	if req.Spec.Problem != "" {
		// The AC's entry is at fault, not one of its artifacts: its reason as it is.
		done.Blocked = req.Spec.Problem
	} else if k, err := kinds.Lookup(req.Spec.Kind); err == nil {
		if done, err = k.Render(ctx, &s.env, ev, req.Spec); err != nil {
			return nil, err
		}
	}
	if done.Blocked != "" {
		s.log.InfoContext(ctx, "render blocked", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", done.Blocked)
	}
	return []events.Event{events.New(done, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}
