// Package web is the built-in sensor for web applications: it drives the system's headless
// Chromium over the DevTools protocol (chromedp), screenshots a view and probes its DOM.
//
// One browser process serves a Sensor for its whole life, because starting Chromium costs
// far more than a render; if it dies, the next call starts a new one. Each Sense call gets
// its own tab in its own browser context (fresh cookies and storage, so one view's fixture
// cannot leak into the next), closed when the call ends. Screenshots are taken one at a
// time per Sensor, the tab brought to front first: Chromium needs that per browser
// context, since a capture in a background tab can stall, and serialising across the
// whole browser costs little next to navigation.
//
// Renders aim to be reproducible: sRGB colour profile, hidden scrollbars, device scale 1,
// web fonts loaded, animations finished, transitions and the caret off, and
// prefers-reduced-motion set so that well-behaved apps hold still on their own.
//
// The browser is never downloaded: FindBrowser looks for the one the operator installed.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	cdptarget "github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// EnvBrowser names the environment variable that points the sensor at a specific browser
// binary, for hosts where Chromium is not on PATH under a usual name.
const EnvBrowser = "TRIBUNAL_CHROMIUM"

// browserNames are tried on PATH, in order, when EnvBrowser is unset. Debian ships
// "chromium", Ubuntu's older packages "chromium-browser", Google's packages
// "google-chrome".
var browserNames = []string{"chromium", "chromium-browser", "google-chrome"}

// ErrNoBrowser is wrapped when no browser binary can be found, so that callers (and tests)
// can tell "not installed" from "installed but broken".
var ErrNoBrowser = errclass.New(errclass.Unavailable, "no chromium browser found")

// DefaultQueryConvention is how a view's fixture and appearance reach the application
// unless the operator configures the app's own convention. It is the sensor contract's
// default, so apps written for it work unchanged.
const DefaultQueryConvention = "argus_fixture={fixture}&argus_appearance={appearance}"

// Defaults for Options fields left zero.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultStartTimeout = 30 * time.Second
	DefaultMaxTabs      = 4
	DefaultMaxNodes     = 5000
)

// FindBrowser returns the browser binary the sensor would run: the path in EnvBrowser if
// set, else the first of chromium, chromium-browser and google-chrome on PATH. It never
// downloads anything, so a missing browser is an operator's installation problem that
// shows up as ErrNoBrowser.
func FindBrowser() (string, error) {
	if p := os.Getenv(EnvBrowser); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%q is not an executable: %w", EnvBrowser, p, err)
		}
		return path, nil
	}
	for _, name := range browserNames {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: set %s or put one of %s on PATH", ErrNoBrowser, EnvBrowser, strings.Join(browserNames, ", "))
}

// Options configures a Sensor. The zero value is usable: it finds the browser, takes
// absolute routes only, applies DefaultQueryConvention and reaches any host, as suits
// the all-in-one run of one trusted user; a renderer that serves teams sets Shared.
type Options struct {
	// ExecPath is the browser binary; empty means FindBrowser.
	ExecPath string
	// BaseURL resolves routes that are paths rather than URLs, so that specs can name
	// "/settings" and the deployment decides where the app runs.
	BaseURL string
	// QueryConvention is a query-string template merged into every view's URL. The
	// placeholders {fixture}, {appearance}, {state} and {target} are replaced by the
	// view's fields; a parameter whose value comes out empty is left out. Empty means
	// DefaultQueryConvention; "-" disables the convention.
	QueryConvention string
	// Timeout bounds one Sense call, from opening the tab to the probe.
	Timeout time.Duration
	// StartTimeout bounds starting the browser.
	StartTimeout time.Duration
	// MaxTabs bounds concurrent Sense calls, so a burst of jobs cannot open more tabs
	// than the host can render.
	MaxTabs int
	// MaxNodes bounds the probe's element count, because probe content is app-controlled
	// and must stay bounded like its labels.
	MaxNodes int
	// NoSandbox turns Chromium's sandbox off even when not running as root, for
	// containers without user namespaces. As root it is always off (Chromium refuses to
	// start otherwise).
	NoSandbox bool
	// Shared says the renderer serves teams (every `tribunal serve` of the renderer):
	// then the browser reaches only AllowHosts, and with none every route is refused,
	// since otherwise a spec's route could point it at internal services (a cloud
	// metadata endpoint, another service's /metrics) whose screenshot the judge and the
	// team then see. Unshared and without AllowHosts, the browser reaches every host the
	// renderer can, for the all-in-one mode that renders only its own user's apps.
	Shared bool
	// AllowHosts, when set, are the only hosts the browser may reach: the view's page,
	// its redirects and everything the page loads or connects to. Entries are a host
	// ("app.internal"), a host and port ("localhost:3000"), a wildcard for subdomains
	// ("*.preview.example.com") or "*" for every host. Whatever the entry, the addresses
	// the browser is let through to follow the rule of artifact URLs
	// (netguard.ForURLs): no special-purpose address (loopback, private use, link
	// local, unspecified, ...) unless AllowPrivate opens the private ones or an entry
	// names the address itself ("127.0.0.1:3000"). The check runs on the address dialled
	// after name resolution, so neither a DNS answer nor a redirect gets around it.
	AllowHosts []string
	// AllowPrivate lets allowed hosts resolve to loopback, private-use, shared and
	// link-local addresses (an internal staging app), as artifact.FetchOptions.AllowPrivate
	// lets artifact URLs. It trusts the DNS of every allowed name: a wildcard's
	// subdomains included.
	AllowPrivate bool
	// Logger receives chromedp's diagnostics and refused requests; nil discards them.
	Logger *slog.Logger

	// resolver stands in for the system's resolver behind the egress proxy, so that a
	// test can rebind a name with a DNS server of its own.
	resolver *net.Resolver
}

func (o Options) withDefaults() Options {
	if o.QueryConvention == "" {
		o.QueryConvention = DefaultQueryConvention
	}
	o.Timeout = sensor.OrDefault(o.Timeout, DefaultTimeout)
	o.StartTimeout = sensor.OrDefault(o.StartTimeout, DefaultStartTimeout)
	o.MaxTabs = sensor.OrDefault(o.MaxTabs, DefaultMaxTabs)
	o.MaxNodes = sensor.OrDefault(o.MaxNodes, DefaultMaxNodes)
	return o
}

// Sensor renders web views in one long-lived headless Chromium. It implements
// sensor.Sensor and is safe for concurrent use.
type Sensor struct {
	opts     Options
	execPath string
	base     *url.URL
	conv     url.Values    // parsed QueryConvention; nil when disabled
	policy   *egressPolicy // nil when every host is allowed
	egress   *egressProxy  // the browser's default proxy when policy is set: refuses everything

	allocCtx    context.Context
	allocCancel context.CancelFunc

	mu      sync.Mutex // guards browser and closed
	browser *browserRun
	closed  bool

	tabs    chan struct{}  // semaphore of MaxTabs
	shot    chan struct{}  // semaphore of 1: one screenshot at a time
	closing sync.WaitGroup // tabs being closed in the background; Close waits for them
}

// browserRun is one browser process. A crashed browser is replaced by a new run on the
// next Sense call, so a long-lived renderer survives Chromium dying under it.
type browserRun struct {
	ctx    context.Context // the browser's root chromedp context; done when the browser is gone
	cancel context.CancelFunc
}

var _ sensor.Sensor = (*Sensor)(nil)

// New finds the browser and starts it, so that a broken installation fails at startup
// instead of on the first job. ctx bounds the start only; the browser lives until Close.
func New(ctx context.Context, opts Options) (*Sensor, error) {
	opts = opts.withDefaults()
	s := &Sensor{
		opts: opts,
		tabs: make(chan struct{}, opts.MaxTabs),
		shot: make(chan struct{}, 1),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || !u.IsAbs() {
			return nil, fmt.Errorf("web sensor: base URL %q must be absolute", opts.BaseURL)
		}
		s.base = u
	}
	if opts.QueryConvention != "-" {
		conv, err := url.ParseQuery(opts.QueryConvention)
		if err != nil {
			return nil, fmt.Errorf("web sensor: query convention %q: %w", opts.QueryConvention, err)
		}
		s.conv = conv
	}
	switch {
	case len(opts.AllowHosts) > 0:
		allow, err := parseAllowHosts(opts.AllowHosts)
		if err != nil {
			return nil, fmt.Errorf("web sensor: %w", err)
		}
		s.policy = newEgressPolicy(allow, opts.AllowPrivate)
	case opts.Shared:
		s.policy = newEgressPolicy(&hostAllowlist{}, opts.AllowPrivate)
	}
	if s.policy != nil {
		s.policy.resolver = opts.resolver
	}
	s.execPath = opts.ExecPath
	if s.execPath == "" {
		p, err := FindBrowser()
		if err != nil {
			return nil, sensor.Infrastructure(err, "web sensor")
		}
		s.execPath = p
	}
	if s.policy != nil {
		// Views run behind proxies of their own; this one is for whatever runs outside
		// them (the first tab, the browser's own requests), and lets nothing through.
		egress, err := startEgressProxy(newEgressPolicy(&hostAllowlist{}, false), opts.Logger)
		if err != nil {
			return nil, err
		}
		s.egress = egress
	}
	s.allocCtx, s.allocCancel = chromedp.NewExecAllocator(context.Background(), s.allocatorOptions()...)
	b, err := s.start(ctx)
	if err != nil {
		s.allocCancel()
		if s.egress != nil {
			s.egress.Close()
		}
		return nil, err
	}
	s.browser = b
	return s, nil
}

// ExecPath returns the browser binary the sensor runs, for logs and diagnostics.
func (s *Sensor) ExecPath() string { return s.execPath }

// Flags returns the command-line flags the sensor gives Chromium, so that operators can
// reproduce a render by hand. chromedp adds --remote-debugging-pipe, a fresh
// --user-data-dir per browser and about:blank.
func (s *Sensor) Flags() []string {
	var out []string
	for _, f := range s.flags() {
		switch v := f.value.(type) {
		case bool:
			if v {
				out = append(out, "--"+f.name)
			}
		case string:
			out = append(out, "--"+f.name+"="+v)
		}
	}
	return out
}

type flag struct {
	name  string
	value any
}

// flags lists Chromium's switches. Each one is here for determinism (same pixels on every
// run), for quiet (no network traffic but the app's), or because this host needs it.
func (s *Sensor) flags() []flag {
	fs := []flag{
		{"headless", true},
		{"no-sandbox", s.opts.NoSandbox || os.Geteuid() == 0},
		{"disable-gpu", true},
		{"disable-quic", true},
		{"no-first-run", true},
		{"no-default-browser-check", true},
		{"disable-background-networking", true},
		{"disable-component-update", true},
		{"disable-sync", true},
		{"disable-extensions", true},
		{"disable-default-apps", true},
		{"disable-breakpad", true},
		{"disable-dev-shm-usage", true},
		{"disable-background-timer-throttling", true},
		{"disable-backgrounding-occluded-windows", true},
		{"disable-renderer-backgrounding", true},
		{"force-color-profile", "srgb"},
		{"hide-scrollbars", true},
		{"mute-audio", true},
		{"password-store", "basic"},
		{"use-mock-keychain", true},
	}
	if s.egress != nil {
		fs = append(fs,
			flag{"proxy-server", s.egress.URL()},
			// Without this Chromium sends loopback requests direct, around the proxy.
			flag{"proxy-bypass-list", proxyBypassList},
			// WebRTC's UDP would leave around the proxy too.
			flag{"webrtc-ip-handling-policy", "disable_non_proxied_udp"},
		)
	}
	return fs
}

// proxyBypassList takes loopback off Chromium's implicit bypass list, so that loopback
// requests go through the proxy too.
const proxyBypassList = "<-loopback>"

func (s *Sensor) allocatorOptions() []chromedp.ExecAllocatorOption {
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(s.execPath)}
	for _, f := range s.flags() {
		// A false no-sandbox is still passed, so that chromedp does not add its own.
		opts = append(opts, chromedp.Flag(f.name, f.value))
	}
	return opts
}

func (s *Sensor) contextOptions() []chromedp.ContextOption {
	logf := func(string, ...any) {}
	errf := logf
	if l := s.opts.Logger; l != nil {
		logf = func(f string, args ...any) { l.Debug(fmt.Sprintf(f, args...), "component", "chromedp") }
		errf = func(f string, args ...any) { l.Warn(fmt.Sprintf(f, args...), "component", "chromedp") }
	}
	return []chromedp.ContextOption{
		chromedp.WithBrowserOption(chromedp.WithBrowserLogf(logf), chromedp.WithBrowserErrorf(errf)),
	}
}

// start launches a browser process and waits until it answers.
func (s *Sensor) start(ctx context.Context) (*browserRun, error) {
	rootCtx, cancel := chromedp.NewContext(s.allocCtx, s.contextOptions()...)
	errc := make(chan error, 1)
	// The first Run binds the browser's life to rootCtx, so it must not carry ctx's
	// deadline; the select below applies the deadline instead.
	go func() { errc <- chromedp.Do(rootCtx) }()
	timer := time.NewTimer(s.opts.StartTimeout)
	defer timer.Stop()
	select {
	case err := <-errc:
		if err != nil {
			cancel()
			return nil, sensor.Infrastructure(err, "start %s", s.execPath)
		}
		return &browserRun{ctx: rootCtx, cancel: cancel}, nil
	case <-timer.C:
		cancel()
		return nil, sensor.Infrastructure(nil, "start %s: no answer within %s", s.execPath, s.opts.StartTimeout)
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("web sensor: start %s: %w", s.execPath, ctx.Err())
	}
}

// current returns a live browser, starting a new one if the previous one died.
func (s *Sensor) current(ctx context.Context) (*browserRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, sensor.Infrastructure(nil, "web sensor is closed")
	}
	if s.browser != nil && s.browser.ctx.Err() == nil {
		return s.browser, nil
	}
	if s.browser != nil {
		s.browser.cancel()
		s.browser = nil
	}
	b, err := s.start(ctx)
	if err != nil {
		return nil, err
	}
	s.browser = b
	return b, nil
}

// closeLater registers a background tab close with Close, unless Close already started
// (then the caller closes the tab itself, and Close's wait cannot race the registration).
func (s *Sensor) closeLater() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closing.Add(1)
	return true
}

// Close stops the browser and removes its profile directory, reporting a cleanup that
// failed (such as a profile directory left behind). Sense calls after Close fail.
func (s *Sensor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	b := s.browser
	s.browser = nil
	s.mu.Unlock()

	s.closing.Wait()
	var err error
	if b != nil && b.ctx.Err() == nil {
		// Graceful first, so Chromium can shut its children down; b.cancel is the
		// hard stop should it not manage within the timeout.
		tctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		if cerr := chromedp.Cancel(tctx); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) && !errors.Is(cerr, context.Canceled) {
			err = fmt.Errorf("web sensor: close browser: %w", cerr)
		}
		cancel()
	}
	if b != nil {
		b.cancel()
	}
	s.allocCancel()
	if s.egress != nil {
		s.egress.Close()
	}
	return err
}

// Sense renders the view in a new tab and returns its screenshot and probe.
//
// A view the app cannot serve (bad route, navigation error, HTTP error status, no render
// within Timeout) is a sensor.FaultUnrenderable error; a browser that cannot start or dies
// is FaultInfrastructure. When ctx ends first, the error wraps ctx.Err() and carries no
// kind: nobody is at fault.
func (s *Sensor) Sense(ctx context.Context, v sensor.View) (sensor.Capture, error) {
	target, err := s.ViewURL(v)
	if err != nil {
		return sensor.Capture{}, err
	}
	if err := s.checkRoute(target); err != nil {
		return sensor.Capture{}, err
	}
	scheme, err := colorScheme(v.Appearance)
	if err != nil {
		return sensor.Capture{}, err
	}

	select {
	case s.tabs <- struct{}{}:
		defer func() { <-s.tabs }()
	case <-ctx.Done():
		return sensor.Capture{}, fmt.Errorf("web sensor: waiting for a free tab: %w", ctx.Err())
	}

	b, err := s.current(ctx)
	if err != nil {
		return sensor.Capture{}, err
	}

	var px *egressProxy // the view's own way out, when hosts are restricted
	var contextOpts []chromedp.CreateBrowserContextOption
	if s.policy != nil {
		if px, err = startEgressProxy(s.policy, s.opts.Logger); err != nil {
			return sensor.Capture{}, sensor.Infrastructure(err, "render %s", target)
		}
		contextOpts = append(contextOpts, func(p *cdptarget.CreateBrowserContextParams) {
			p.ProxyServer, p.ProxyBypassList = px.URL(), proxyBypassList
		})
	}
	tabCtx, closeTab := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext(contextOpts...))
	closeView := func() {
		closeTab()
		if px != nil {
			// After the tab: its requests in flight end at the proxy, not at the host.
			px.Close()
		}
	}
	runCtx, cancelRun := context.WithTimeout(tabCtx, s.opts.Timeout)
	stop := context.AfterFunc(ctx, cancelRun)
	defer func() {
		stop()
		cancelRun()
		if ctx.Err() != nil && s.closeLater() {
			// The caller has given up: closing the tab can take a while, so do
			// it in the background rather than delay the return.
			go func() {
				defer s.closing.Done()
				closeView()
			}()
			return
		}
		closeView()
	}()

	c, err := s.render(runCtx, target, v.Size(), scheme, px)
	if err == nil {
		if refused := px.refusals(); len(refused) > 0 && s.opts.Logger != nil {
			// What a page may not load is left out of its render, not hidden.
			s.opts.Logger.Info("web sensor: rendered without what the renderer refused", "route", target, "refused", refused)
		}
		return c, nil
	}
	switch {
	case ctx.Err() != nil:
		return sensor.Capture{}, fmt.Errorf("web sensor: render %s: %w", target, ctx.Err())
	case b.ctx.Err() != nil:
		return sensor.Capture{}, sensor.Infrastructure(err, "browser died while rendering %s", target)
	case sensor.FaultOf(err) != 0, errors.Is(err, sensor.ErrRefused):
		return sensor.Capture{}, err
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return sensor.Capture{}, sensor.Unrenderable(err, "%s did not finish rendering within %s", target, s.opts.Timeout)
	default:
		return sensor.Capture{}, sensor.Infrastructure(err, "render %s", target)
	}
}

// checkRoute refuses a route before any tab opens when its host is outside the allowed
// hosts or is an address the renderer refuses, naming the setting that would allow it.
func (s *Sensor) checkRoute(target string) error {
	if s.policy == nil {
		return nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return sensor.Unrenderable(err, "route %q is not a URL", target)
	}
	if !s.policy.allow.allows(u.Host, defaultPort(u.Scheme)) {
		return fmt.Errorf("%w: route %s: %s", sensor.ErrRefused, target, s.policy.hostRefusal(u.Host))
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := s.policy.checkDial(u.Hostname(), ip); err != nil {
			return fmt.Errorf("%w: route %s: host %s: %v", sensor.ErrRefused, target, u.Host, err)
		}
	}
	return nil
}

// ViewURL is the URL the sensor navigates to for v: the route (resolved against BaseURL
// when it is a path) with the query convention merged into its query string. Only http
// and https are allowed, so that a job cannot make the renderer screenshot its own files.
func (s *Sensor) ViewURL(v sensor.View) (string, error) {
	if strings.TrimSpace(v.Route) == "" {
		return "", sensor.Unrenderable(nil, "view has no route")
	}
	u, err := url.Parse(v.Route)
	if err != nil {
		return "", sensor.Unrenderable(err, "route %q is not a URL", v.Route)
	}
	if !u.IsAbs() {
		if s.base == nil {
			return "", sensor.Unrenderable(nil, "route %q is relative and the web sensor has no base URL", v.Route)
		}
		u = s.base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", sensor.Unrenderable(nil, "route %q: only http and https routes can be rendered", v.Route)
	}
	if u.Host == "" {
		return "", sensor.Unrenderable(nil, "route %q has no host", v.Route)
	}
	ApplyQueryConvention(u, s.conv, v)
	return u.String(), nil
}

// ApplyQueryConvention merges the parsed convention into u's query, replacing any
// parameter of the same name. Placeholders are substituted with the view's fields;
// parameters that come out empty are skipped, so a view without a fixture does not send
// an empty fixture parameter.
func ApplyQueryConvention(u *url.URL, conv url.Values, v sensor.View) {
	if len(conv) == 0 {
		return
	}
	r := strings.NewReplacer(
		"{fixture}", v.Fixture,
		"{appearance}", v.Appearance,
		"{state}", v.State,
		"{target}", v.Target,
	)
	q := u.Query()
	changed := false
	for key, vals := range conv {
		if len(vals) == 0 {
			continue
		}
		val := r.Replace(vals[len(vals)-1])
		if val == "" {
			continue
		}
		q.Set(r.Replace(key), val)
		changed = true
	}
	if changed {
		u.RawQuery = q.Encode()
	}
}

// colorScheme maps an appearance to the prefers-color-scheme value to emulate. An empty
// appearance means light, the web's default.
func colorScheme(appearance string) (string, error) {
	switch strings.ToLower(appearance) {
	case "", sensor.Light:
		return "light", nil
	case sensor.Dark:
		return "dark", nil
	default:
		return "", sensor.Unrenderable(nil, "appearance %q: the web sensor can emulate only light and dark", appearance)
	}
}
