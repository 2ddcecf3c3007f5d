package renderer

import (
	"context"
	"fmt"
	"sync"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
)

// Sensors are the view sensors a renderer offers: the built-in web sensor (a real headless
// Chromium, started on first use) and the operator's command adapters. Jobs name an
// adapter, never a command.
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

// Sense implements stage.Sensors.
func (s *Sensors) Sense(ctx context.Context, adapter string, v sensor.View) (sensor.Capture, error) {
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
