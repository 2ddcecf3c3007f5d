// Package judge is the judge service: for every gates.done it asks its provider for blind
// answers (pkg/kind/<name>.Judge) and publishes verdict.emitted. It reads artifacts by
// digest and sees blind slots only; it never learns roles, paths or diffs because no
// event it reads has them.
package judge

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
)

// Service judges gated jobs.
type Service struct {
	env kind.JudgeEnv
}

// New builds the judge service. Hold env.Provider to shared rate limits by wrapping it
// with pkg/judge.Limited (app.Start does, for judges and renderers alike); env.Cache, when
// set, is the judge-call cache shared by every judge instance.
func New(env kind.JudgeEnv) *Service {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	env.Log = env.Log.With("service", bus.Judge, "instance", env.Instance)
	return &Service{env: env}
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
	ctx = pj.WithTenant(ctx, ev.Tenant)
	v, err := k.Judge(ctx, &s.env, ev, gd)
	if err != nil {
		return nil, err
	}
	return []events.Event{events.New(v, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}
