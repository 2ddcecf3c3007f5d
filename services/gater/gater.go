// Package gater is the gater service: deterministic gates over rendered artifacts
// (pkg/kind/<name>.Gate). A job whose gates pass goes to the judges as gates.done with its
// artifacts in blind slots and no role labels; anything else goes to the aggregator as
// gates.failed and never reaches a judge.
package gater

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service gates rendered jobs.
type Service struct {
	env stage.GateEnv
}

// New builds the gater.
func New(env stage.GateEnv) *Service {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	env.Log = env.Log.With("service", bus.Gater)
	return &Service{env: env}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	rd, ok := ev.Payload.(*events.RenderDone)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("gater got %s", ev.Type))
	}
	p, err := s.gate(ctx, ev, rd)
	if err != nil {
		return nil, err
	}
	telemetry.GateFailures(p)
	return []events.Event{events.New(p, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}

func (s *Service) gate(ctx context.Context, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	if rd.Blocked != "" {
		return &events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Blocked: rd.Blocked}, nil
	}
	k, err := registry.Lookup(rd.Spec.Kind)
	if err != nil {
		return &events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Blocked: fmt.Sprintf("no gates for judge kind %q", rd.Spec.Kind)}, nil
	}
	return stage.GateJob(ctx, k, &s.env, ev, rd)
}
