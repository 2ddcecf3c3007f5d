package stages

import (
	"context"
	"errors"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// Render implements stage.Stages: one view captured as render.png and probe.json in blob
// storage. A view the sensor could not render (the page failed, the build broke) is a
// failed gate for the loop, not a blocked job; a missing sensor blocks the view.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	rs := rubricwire.SpecOf(spec.KindPart)
	if rs.Blocked != "" {
		done.Blocked = rs.Blocked
		return done, nil
	}
	if env.Sensors == nil {
		done.Blocked = "no sensor: this renderer has no rubric sensors configured"
		return done, nil
	}
	view := sensor.View{Route: rs.Route, Target: rs.Target, State: rs.State,
		Appearance: rs.Appearance, Fixture: rs.Fixture, Viewport: sensor.Viewport{Width: rs.Width, Height: rs.Height}}
	if p := rs.Project; p != nil {
		// Only a renderer that runs a project's own sensor (the all-in-one mode) reads it.
		view.Project = &sensor.Project{Root: p.Root, Sense: p.Sense}
	}
	capt, err := env.Sensors.Sense(ctx, rs.Adapter, view)
	switch {
	case err == nil:
	case errors.Is(err, sensor.ErrNoSensor):
		done.Blocked = "no sensor: " + err.Error()
		return done, nil
	case errors.Is(err, sensor.ErrRefused):
		done.Blocked = err.Error()
		return done, nil
	case sensor.IsUnrenderable(err):
		done.RenderError = err.Error()
		return done, nil
	default:
		return nil, fmt.Errorf("sense %s: %w", rs.ViewKey(), err)
	}
	png, err := blob.PutBytes(ctx, env.Store, ev.Tenant, capt.PNG, "image/png")
	if err != nil {
		return nil, fmt.Errorf("store render: %w", err)
	}
	probe, err := blob.PutBytes(ctx, env.Store, ev.Tenant, capt.Probe, "application/json")
	if err != nil {
		return nil, fmt.Errorf("store probe: %w", err)
	}
	done.Artifacts = map[string]events.Artifact{
		"render": {Blob: events.Blob{SHA256: png.Ref.SHA256, MediaType: "image/png", Size: png.Size}, Class: "image"},
		"probe":  {Blob: events.Blob{SHA256: probe.Ref.SHA256, MediaType: "application/json", Size: probe.Size}, Class: "text"},
	}
	return done, nil
}
