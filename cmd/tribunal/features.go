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

// servedSensorsFromFlags builds the rubric sensors of `tribunal serve`'s renderer, which
// teams share: its web sensor reaches only allowHosts, none until the operator lists
// them, at the addresses artifact URLs may have (private ones only with allowPrivate).
// Unlike `tribunal run`, nobody here renders only their own apps.
func servedSensorsFromFlags(adapters, allowHosts []string, allowPrivate bool) (*renderer.Sensors, error) {
	s, err := sensorsFromFlags(adapters, allowHosts)
	if err != nil {
		return nil, err
	}
	s.Web.Shared, s.Web.AllowPrivate = true, allowPrivate
	return s, nil
}

// sensorsFromFlags builds the renderer's rubric sensors: the built-in web sensor (held
// to allowHosts when given; reaching any host without, as the all-in-one run's, which
// renders its own user's apps) and the operator's command adapters
// ("name=/path/to/sense.sh").
func sensorsFromFlags(adapters, allowHosts []string) (*renderer.Sensors, error) {
	if len(allowHosts) > 0 {
		if err := web.CheckAllowHosts(allowHosts); err != nil {
			return nil, fmt.Errorf("--web-allow-host: %w", err)
		}
	}
	// Containers without user namespaces cannot start Chromium's sandbox.
	s := &renderer.Sensors{Web: web.Options{NoSandbox: os.Getenv("TRIBUNAL_CHROMIUM_NO_SANDBOX") == "true", AllowHosts: allowHosts,
		Logger: slog.Default()}}
	if len(adapters) == 0 {
		return s, nil
	}
	m := map[string]string{}
	for _, a := range adapters {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" || name == "web" {
			return nil, fmt.Errorf("--adapter %q: want name=/path/to/sense.sh (web is built in)", a)
		}
		m[name] = path
	}
	reg, err := command.New(command.Options{Adapters: m})
	if err != nil {
		return nil, err
	}
	s.Commands = reg
	return s, nil
}

// gatesFromFlags builds the gater's operator gates commands ("name=/path/to/gates.sh").
func gatesFromFlags(adapters []string) (*command.Gates, error) {
	g := &command.Gates{Commands: map[string]string{}}
	for _, a := range adapters {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--gates-adapter %q: want name=/path/to/gates.sh", a)
		}
		g.Commands[name] = path
	}
	return g, nil
}
