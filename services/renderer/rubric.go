package renderer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
)

// Sensors are the rubric sensors a renderer offers: the built-in web sensor (a real
// headless Chromium, started on first use) and the operator's command adapters. Jobs
// name an adapter, never a command.
type Sensors struct {
	Web      web.Options
	Commands *command.Registry

	once   sync.Once
	webS   *web.Sensor
	webErr error
}

// Close stops the browser, if one was started.
func (s *Sensors) Close() {
	if s != nil && s.webS != nil {
		s.webS.Close()
	}
}

func (s *Sensors) sense(ctx context.Context, adapter string, v sensor.View) (sensor.Capture, error) {
	if adapter == "web" {
		s.once.Do(func() { s.webS, s.webErr = web.New(context.WithoutCancel(ctx), s.Web) })
		if s.webErr != nil {
			return sensor.Capture{}, fmt.Errorf("%w: web (%v)", sensor.ErrNoSensor, s.webErr)
		}
		return s.webS.Sense(ctx, v)
	}
	if s.Commands == nil {
		return sensor.Capture{}, fmt.Errorf("%w for adapter %q", sensor.ErrNoSensor, adapter)
	}
	return s.Commands.Sense(ctx, adapter, v)
}

// WithSensors sets the rubric sensors.
func (s *Service) WithSensors(ss *Sensors) *Service {
	s.sensors = ss
	return s
}

// renderRubric captures one view: render.png and probe.json into blob storage. A view
// the sensor could not render (the page failed, the build broke) is a failed gate for the
// loop, not a blocked job; a missing sensor blocks the view.
func (s *Service) renderRubric(ctx context.Context, ev events.Event, rs *events.RubricSpec, done *events.RenderDone) error {
	if rs.Blocked != "" {
		done.Blocked = rs.Blocked
		return nil
	}
	if s.sensors == nil {
		done.Blocked = "no sensor: this renderer has no rubric sensors configured"
		return nil
	}
	capt, err := s.sensors.sense(ctx, rs.Adapter, sensor.View{Route: rs.Route, Target: rs.Target, State: rs.State,
		Appearance: rs.Appearance, Fixture: rs.Fixture, Viewport: sensor.Viewport{Width: rs.Width, Height: rs.Height}})
	switch {
	case err == nil:
	case errors.Is(err, sensor.ErrNoSensor):
		done.Blocked = "no sensor: " + err.Error()
		return nil
	case errors.Is(err, sensor.ErrRefused):
		done.Blocked = err.Error()
		return nil
	case sensor.IsUnrenderable(err):
		done.RenderError = err.Error()
		return nil
	default:
		return fmt.Errorf("sense %s: %w", rs.ViewKey(), err)
	}
	png, err := blob.PutBytes(ctx, s.store, ev.Tenant, capt.PNG, "image/png")
	if err != nil {
		return fmt.Errorf("store render: %w", err)
	}
	probe, err := blob.PutBytes(ctx, s.store, ev.Tenant, capt.Probe, "application/json")
	if err != nil {
		return fmt.Errorf("store probe: %w", err)
	}
	done.Artifacts = map[string]events.Artifact{
		"render": {Blob: events.Blob{SHA256: png.Ref.SHA256, MediaType: "image/png", Size: png.Size}, Class: "image"},
		"probe":  {Blob: events.Blob{SHA256: probe.Ref.SHA256, MediaType: "application/json", Size: probe.Size}, Class: "text"},
	}
	return nil
}
