package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net/url"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// freezeScript makes the frame still before the screenshot: CSS animations jump to their
// end state, transitions and the text caret are off, running Web Animations are finished
// (or cancelled when infinite), and focus leaves any text field. It resolves after two
// animation frames so that the new styles are painted; the timeout fallback keeps a tab
// that gets no frames from hanging the render.
const freezeScript = `new Promise((resolve) => {
	const style = document.createElement("style");
	style.textContent = "*, *::before, *::after {" +
		"animation-duration: 0s !important; animation-delay: 0s !important;" +
		"animation-iteration-count: 1 !important; transition: none !important;" +
		"caret-color: transparent !important; scroll-behavior: auto !important; }";
	(document.head || document.documentElement).appendChild(style);
	for (const a of document.getAnimations()) {
		try { a.finish(); } catch (e) { a.cancel(); }
	}
	if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
	setTimeout(() => resolve(true), 250);
	requestAnimationFrame(() => requestAnimationFrame(() => resolve(true)));
})`

// fontsReadyScript waits for web fonts, so that text is not captured in a fallback face.
const fontsReadyScript = `document.fonts.ready.then(() => true)`

// render runs one view in the tab of ctx, whose requests go through px when hosts are
// restricted (nil otherwise). Errors it classifies itself are the app's fault or the
// renderer's policy; the caller classifies the rest.
func (s *Sensor) render(ctx context.Context, target string, size sensor.Viewport, scheme string, px *egressProxy) (sensor.Capture, error) {
	setup := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := cdp.Call(ctx, t, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width:             int64(size.Width),
			Height:            int64(size.Height),
			DeviceScaleFactor: 1,
			Mobile:            false,
		}); err != nil {
			return fmt.Errorf("set viewport %dx%d: %w", size.Width, size.Height, err)
		}
		if _, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{
				{Name: "prefers-color-scheme", Value: scheme},
				{Name: "prefers-reduced-motion", Value: "reduce"},
			},
		}); err != nil {
			return fmt.Errorf("emulate prefers-color-scheme %s: %w", scheme, err)
		}
		if _, err := cdp.Call(ctx, t, emulation.SetScrollbarsHidden, emulation.SetScrollbarsHiddenParams{Hidden: true}); err != nil {
			return fmt.Errorf("hide scrollbars: %w", err)
		}
		return nil
	})
	if err := chromedp.Do(ctx, setup); err != nil {
		return sensor.Capture{}, fmt.Errorf("prepare tab: %w", err)
	}

	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(target))
	if err != nil {
		var le *chromedp.LoadError
		if errors.As(err, &le) && px != nil && strings.Contains(le.Error(), "ERR_TUNNEL_CONNECTION_FAILED") {
			// The egress proxy refused the tunnel: an https redirect to another host, or
			// an allowed host at a refused address.
			return sensor.Capture{}, refused(target, "was stopped on its way", px, err)
		}
		if errors.As(err, &le) {
			return sensor.Capture{}, sensor.Unrenderable(err, "navigation to %s failed", target)
		}
		return sensor.Capture{}, fmt.Errorf("navigate to %s: %w", target, err)
	}
	if resp == nil {
		return sensor.Capture{}, sensor.Unrenderable(nil, "navigation to %s got no HTTP response", target)
	}
	for k, v := range resp.Headers {
		if !strings.EqualFold(k, RefusedHeader) {
			continue
		}
		what := fmt.Sprintf("was redirected or led to %v", v)
		if u, err := url.Parse(target); err == nil && fmt.Sprint(v) == u.Host {
			what = "was refused" // the route's own host, at an address the renderer refuses
		}
		return sensor.Capture{}, refused(target, what, px, nil)
	}
	if resp.Status >= 400 {
		return sensor.Capture{}, sensor.Unrenderable(nil, "%s answered HTTP %d %s", target, resp.Status, resp.StatusText)
	}

	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fontsReadyScript, chromedp.EvalAwaitPromise)); err != nil {
		return sensor.Capture{}, fmt.Errorf("wait for fonts: %w", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](freezeScript, chromedp.EvalAwaitPromise)); err != nil {
		return sensor.Capture{}, fmt.Errorf("freeze animations: %w", err)
	}

	shot, err := s.screenshot(ctx)
	if err != nil {
		return sensor.Capture{}, err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(shot))
	if err != nil {
		return sensor.Capture{}, fmt.Errorf("screenshot is not a PNG: %w", err)
	}
	if cfg.Width != size.Width || cfg.Height != size.Height {
		return sensor.Capture{}, fmt.Errorf("screenshot is %dx%d, want %dx%d", cfg.Width, cfg.Height, size.Width, size.Height)
	}

	tree, err := chromedp.Run(ctx, probeAction(s.opts.MaxNodes))
	if err != nil {
		return sensor.Capture{}, fmt.Errorf("probe: %w", err)
	}
	probe, err := sensor.MarshalProbe(sensor.TruncateLabels(tree, sensor.MaxLabel))
	if err != nil {
		return sensor.Capture{}, err
	}
	if px != nil {
		// Checked after the capture: a page that navigated itself elsewhere at any point
		// before it shows the refusal (or Chromium's error page) and is refused, while a
		// later navigation cannot have changed what was captured.
		href, err := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href"))
		if err != nil {
			return sensor.Capture{}, fmt.Errorf("read the page's location: %w", err)
		}
		if u, perr := url.Parse(href); perr != nil || !s.policy.allow.allows(u.Host, defaultPort(u.Scheme)) {
			return sensor.Capture{}, refused(target, "navigated to "+href, px, nil)
		}
	}
	return sensor.Capture{PNG: shot, Probe: probe}, nil
}

// refused is the error of a view whose navigation the renderer's policy stopped: what
// happened to target, and the reasons the view's proxy recorded, which name the hosts
// and the settings that would allow them. cause is the browser's error, if any.
func refused(target, what string, px *egressProxy, cause error) error {
	reasons := px.refusals()
	if len(reasons) == 0 {
		reasons = []string{"a host not among the web sensor's allowed hosts, or an address the renderer refuses"}
	}
	if cause != nil {
		return fmt.Errorf("%w: route %s %s: %s (%v)", sensor.ErrRefused, target, what, strings.Join(reasons, "; "), cause)
	}
	return fmt.Errorf("%w: route %s %s: %s", sensor.ErrRefused, target, what, strings.Join(reasons, "; "))
}

// screenshot captures the viewport, one capture at a time per Sensor.
func (s *Sensor) screenshot(ctx context.Context) ([]byte, error) {
	select {
	case s.shot <- struct{}{}:
		defer func() { <-s.shot }()
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the screenshot turn: %w", ctx.Err())
	}
	shot, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		if _, err := cdp.Call(ctx, t, page.BringToFront, cdp.Empty{}); err != nil {
			return nil, fmt.Errorf("bring tab to front: %w", err)
		}
		res, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format:                page.CaptureScreenshotFormatPng,
			FromSurface:           new(true),
			CaptureBeyondViewport: new(false),
		})
		if err != nil {
			return nil, err
		}
		return res.Data, nil
	})
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return shot, nil
}
