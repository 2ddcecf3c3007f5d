package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

// featureServer serves rubric feature folders on loopback for the all-in-one mode, so a
// spec may name a page inside its own folder ("route": "page.html").
type featureServer struct {
	mu      sync.Mutex
	servers map[string]*http.Server
	urls    map[string]string
}

func (f *featureServer) serve(dir string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.urls[dir]; ok {
		return u, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.FileServer(regularFiles{http.Dir(dir)}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if f.servers == nil {
		f.servers, f.urls = map[string]*http.Server{}, map[string]string{}
	}
	f.servers[dir] = srv
	f.urls[dir] = "http://" + ln.Addr().String()
	return f.urls[dir], nil
}

// regularFiles serves directories and regular files only: opening a FIFO left in a
// feature folder would block its request until the page load timed out.
type regularFiles struct{ dir http.Dir }

func (r regularFiles) Open(name string) (http.File, error) {
	p := filepath.Join(string(r.dir), filepath.FromSlash(path.Clean("/"+name)))
	if st, err := os.Stat(p); err == nil && !st.IsDir() && !st.Mode().IsRegular() {
		return nil, fs.ErrPermission
	}
	return r.dir.Open(name)
}

func (f *featureServer) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		_ = s.Close()
	}
}

// adapterFlags are the rubric adapter settings `run` and `serve` share: the operator's
// sensors (--adapter name=/path/to/sense.sh) and gates commands (--gates-adapter
// name=/path/to/gates.sh), and the variables passed through to both (--adapter-env).
type adapterFlags struct {
	sensors, gates, env []string
}

// servedSensorsFromFlags builds the rubric sensors of `tribunal serve`'s renderer, which
// teams share: its web sensor reaches only allowHosts, none until the operator lists
// them, at the addresses artifact URLs may have (private ones only with allowPrivate),
// and it runs only the sensors its operator registered, never one a team's project ships.
// Unlike `tribunal run`, nobody here renders only their own apps.
func servedSensorsFromFlags(af adapterFlags, allowHosts []string, allowPrivate bool) (*renderer.Sensors, error) {
	s, err := sensorsFromFlags(af, allowHosts, false)
	if err != nil {
		return nil, err
	}
	s.Web.Shared, s.Web.AllowPrivate = true, allowPrivate
	return s, nil
}

// sensorsFromFlags builds the renderer's rubric sensors: the built-in web sensor (held
// to allowHosts when given; reaching any host without, as the all-in-one run's, which
// renders its own user's apps) and the command adapters: the operator's
// ("name=/path/to/sense.sh") and, when local (the all-in-one mode), the
// argus/adapters/{adapter}/sense.sh a feature's project ships.
func sensorsFromFlags(af adapterFlags, allowHosts []string, local bool) (*renderer.Sensors, error) {
	if len(allowHosts) > 0 {
		if err := web.CheckAllowHosts(allowHosts); err != nil {
			return nil, fmt.Errorf("--web-allow-host: %w", err)
		}
	}
	if err := command.CheckPassEnv(af.env); err != nil {
		return nil, fmt.Errorf("--adapter-env: %w", err)
	}
	// Containers without user namespaces cannot start Chromium's sandbox.
	s := &renderer.Sensors{Web: web.Options{NoSandbox: os.Getenv("TRIBUNAL_CHROMIUM_NO_SANDBOX") == "true", AllowHosts: allowHosts,
		Logger: slog.Default()}}
	m := map[string]string{}
	for _, a := range af.sensors {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" || name == "web" {
			return nil, fmt.Errorf("--adapter %q: want name=/path/to/sense.sh (web is built in)", a)
		}
		m[name] = path
	}
	// Always a registry, also with no adapter registered: it says why a view has no
	// sensor (a project's sense.sh a shared renderer will not run, or none at all).
	reg, err := command.New(command.Options{Adapters: m, PassEnv: af.env, Local: local})
	if err != nil {
		return nil, fmt.Errorf("--adapter: %w", err)
	}
	s.Commands = reg
	return s, nil
}

// gatesFromFlags builds the gater's gates commands: the operator's
// ("name=/path/to/gates.sh") and, when local (the all-in-one mode), the
// argus/adapters/{adapter}/gates.sh a feature's project ships, run from its project root.
func gatesFromFlags(af adapterFlags, local bool) (*command.Gates, error) {
	if err := command.CheckPassEnv(af.env); err != nil {
		return nil, fmt.Errorf("--adapter-env: %w", err)
	}
	g := &command.Gates{Commands: map[string]string{}, PassEnv: af.env, Local: local}
	for _, a := range af.gates {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--gates-adapter %q: want name=/path/to/gates.sh", a)
		}
		g.Commands[name] = path
	}
	return g, nil
}

// adapterEnvHelp is --adapter-env's help, shared by run and serve.
const adapterEnvHelp = "rubric: pass this variable of tribunal's environment to sensor and gates adapters, a name or a prefix ending in * (SIMCTL_CHILD_*); they get only PATH, HOME, LANG, LC_ALL, TZ, TMPDIR and USER otherwise (repeatable or comma-separated)"
