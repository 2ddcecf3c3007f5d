// Package command runs sensor and gates adapters: executables that render a view of a
// stack tribunal has no built-in sensor for (an iOS simulator, a desktop toolkit) and
// write render.png and probe.json, per the sensor contract:
//
//	<adapter> --route R --state S --appearance A --fixture F --out DIR
//
// and the platform gates commands of seed 004 (Gates). On a shared renderer a job only
// ever names an adapter; which executable that name runs is the operator's decision, made
// in the Registry, so a team's job never runs a command of its choosing there. Only the
// all-in-one mode (Options.Local, one user on their own machine) also runs the scripts a
// view's own project ships, argus/adapters/{adapter}/sense.sh and gates.sh, from the
// project root, as the seed's loop does.
package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// Defaults for Options fields left zero.
const (
	// DefaultTimeout is generous because adapters commonly build and launch the app.
	DefaultTimeout = 5 * time.Minute
	// DefaultMaxOutput bounds each output file; it matches blob storage's default limit.
	DefaultMaxOutput int64 = 20 << 20
	// DefaultMaxPixels bounds render.png's decoded size, so a hostile PNG cannot
	// exhaust memory when it is validated.
	DefaultMaxPixels = 64 << 20
)

// Output file names the adapter must write into its --out directory.
const (
	RenderFile = "render.png"
	ProbeFile  = "probe.json"
)

// stderrTail is how much of an adapter's stderr a failure reports: enough for a compiler
// error, bounded because the text ends up in a block reason.
const stderrTail = 2048

// Options configures a Registry.
type Options struct {
	// Adapters maps the adapter names jobs may use to the executables that implement
	// them. Paths are resolved once, at New.
	Adapters map[string]string
	// Timeout bounds one adapter run; the whole process group is killed when it
	// expires.
	Timeout time.Duration
	// WorkDir is where per-run output directories are created; empty means the
	// system's temporary directory.
	WorkDir string
	// Dir is the adapter's working directory (typically the project it renders);
	// empty means the renderer's own. A view whose project is run locally (Local) runs
	// in its project root instead.
	Dir string
	// Env is appended to the small inherited environment, as KEY=VALUE entries.
	Env []string
	// PassEnv names further variables of the renderer's environment an adapter gets
	// (see Environ): a name, or a prefix ending in '*' (SIMCTL_CHILD_*).
	PassEnv []string
	// Local runs the sensor a view's own project ships (sensor.View.Project) when no
	// adapter of the view's name is registered, and every adapter of a view with a
	// project in its project root. It is for the all-in-one mode only, where the
	// project is the one user's own folder on this machine; a shared renderer leaves it
	// false, and a job's paths never become a command there.
	Local bool
	// MaxOutput bounds the size of each output file.
	MaxOutput int64
	// MaxPixels bounds render.png's width times height.
	MaxPixels int
}

// Registry holds the adapters an operator registered, and, with Options.Local, runs the
// ones a view's project ships.
type Registry struct {
	adapters map[string]*Adapter
	opts     Options
}

// New resolves every registered adapter, so that a typo in the operator's configuration
// fails at startup rather than blocking every job that names the adapter.
func New(opts Options) (*Registry, error) {
	opts.Timeout = sensor.OrDefault(opts.Timeout, DefaultTimeout)
	opts.MaxOutput = sensor.OrDefault(opts.MaxOutput, DefaultMaxOutput)
	opts.MaxPixels = sensor.OrDefault(opts.MaxPixels, DefaultMaxPixels)
	if err := CheckPassEnv(opts.PassEnv); err != nil {
		return nil, fmt.Errorf("command sensor: %w", err)
	}
	r := &Registry{adapters: make(map[string]*Adapter, len(opts.Adapters)), opts: opts}
	for name, path := range opts.Adapters {
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("command sensor: adapter with an empty name")
		}
		resolved, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("command sensor: adapter %q: %w", name, err)
		}
		if abs, err := filepath.Abs(resolved); err == nil {
			resolved = abs
		}
		r.adapters[name] = &Adapter{name: name, path: resolved, opts: opts}
	}
	return r, nil
}

// Names lists the registered adapters, sorted, for diagnostics.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.adapters))
	for n := range r.adapters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the adapter registered under name. An unknown name is an unrenderable
// error wrapping sensor.ErrNoSensor: the job asked for a sensor this deployment lacks, and
// retrying will not change that.
func (r *Registry) Lookup(name string) (*Adapter, error) {
	a, ok := r.adapters[name]
	if !ok {
		return nil, sensor.Unrenderable(sensor.ErrNoSensor, "no sensor is registered for adapter %q", name)
	}
	return a, nil
}

// Sense runs the sensor of adapter name for the view: the one registered under name,
// else (Options.Local) the project's argus/adapters/{name}/sense.sh, run from the project
// root as the seed's loop runs it. Without either the view is unrenderable
// (sensor.ErrNoSensor), with a reason that says whether the project ships a sensor this
// renderer will not run.
func (r *Registry) Sense(ctx context.Context, name string, v sensor.View) (sensor.Capture, error) {
	if a, ok := r.adapters[name]; ok {
		return a.Sense(ctx, v)
	}
	p := v.Project
	switch {
	case p != nil && p.Sense != "" && r.opts.Local:
		a := &Adapter{name: name, path: filepath.Join(p.Root, filepath.FromSlash(p.Sense)), argv0: p.Sense, project: true, opts: r.opts}
		return a.Sense(ctx, v)
	case p != nil && p.Sense != "":
		return sensor.Capture{}, sensor.Unrenderable(sensor.ErrNoSensor,
			"%s for adapter %q: the project ships %s, but this renderer runs only the sensors its operator registers (--adapter %s=/path/to/sense.sh)", sensor.ErrNoSensor, name, p.Sense, name)
	case p != nil && r.opts.Local && p.Root != "":
		return sensor.Capture{}, sensor.Unrenderable(sensor.ErrNoSensor,
			"%s for adapter %q, and the project %s ships no %s (an executable writing render.png and probe.json; or --adapter %s=/path/to/sense.sh)",
			sensor.ErrNoSensor, name, p.Root, "argus/adapters/"+name+"/sense.sh", name)
	}
	_, err := r.Lookup(name)
	return sensor.Capture{}, err
}

// Adapter is one registered executable. It implements sensor.Sensor; each Sense call runs
// the executable once in a fresh output directory, so concurrent calls do not interfere.
type Adapter struct {
	name string
	path string
	// argv0 is a project's script's path from the project root,
	// argus/adapters/{adapter}/sense.sh; "" for an operator's adapter.
	argv0 string
	// project marks a project's own script, whose failure to start is the project's
	// (unrenderable), not the renderer's.
	project bool
	opts    Options
}

var _ sensor.Sensor = (*Adapter)(nil)

// Name is the name jobs use for the adapter.
func (a *Adapter) Name() string { return a.name }

// Path is the executable the adapter runs.
func (a *Adapter) Path() string { return a.path }

// Sense runs the adapter and reads, validates and bounds what it wrote.
//
// A non-zero exit, a timeout, or missing or malformed outputs are sensor.FaultUnrenderable
// (the app's build or launch failed) and carry the tail of the adapter's stderr. An
// executable that cannot be started at all is sensor.FaultInfrastructure. When ctx ends
// first, the error wraps ctx.Err() and carries no kind.
func (a *Adapter) Sense(ctx context.Context, v sensor.View) (sensor.Capture, error) {
	if err := ctx.Err(); err != nil {
		return sensor.Capture{}, fmt.Errorf("adapter %q: %w", a.name, err)
	}
	out, err := os.MkdirTemp(a.opts.WorkDir, "tribunal-sense-")
	if err != nil {
		return sensor.Capture{}, sensor.Infrastructure(err, "adapter %q: create output directory", a.name)
	}
	defer os.RemoveAll(out)

	runCtx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, a.path,
		"--route", v.Route,
		"--state", v.State,
		"--appearance", v.Appearance,
		"--fixture", v.Fixture,
		"--out", out,
	)
	size := v.Size()
	cmd.Env = append(Environ(a.opts.PassEnv, a.opts.Env),
		"TRIBUNAL_TARGET="+v.Target,
		"TRIBUNAL_VIEWPORT_WIDTH="+strconv.Itoa(size.Width),
		"TRIBUNAL_VIEWPORT_HEIGHT="+strconv.Itoa(size.Height),
	)
	cmd.Dir = a.opts.Dir
	if a.opts.Local && v.Project != nil && v.Project.Root != "" {
		cmd.Dir = v.Project.Root
		if a.argv0 != "" {
			// The project's script runs as the seed's loop starts it, by its path from
			// the project root, so it sees the same $0.
			cmd.Path, cmd.Args[0] = a.argv0, a.argv0
		}
	}
	// Its own process group, so that a timeout kills what the adapter started too
	// (a simulator, a dev server), not only the script.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild that escaped the group could hold stderr open forever.
	cmd.WaitDelay = 2 * time.Second
	stderr := &tailWriter{max: stderrTail}
	cmd.Stdout = io.Discard
	cmd.Stderr = stderr

	start := time.Now()
	runErr := cmd.Run()
	if cmd.Process != nil {
		// Whatever the adapter left running in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case ctx.Err() != nil:
		return sensor.Capture{}, fmt.Errorf("adapter %q: %w", a.name, ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return sensor.Capture{}, sensor.Unrenderable(runCtx.Err(), "adapter %q did not finish within %s%s", a.name, a.opts.Timeout, stderr.suffix())
	case runErr != nil:
		var exit *exec.ExitError
		if errors.As(runErr, &exit) {
			return sensor.Capture{}, sensor.Unrenderable(runErr, "adapter %q failed after %s%s", a.name, time.Since(start).Round(time.Millisecond), stderr.suffix())
		}
		if cmd.Process == nil && a.project {
			// A sensor that cannot start is no sensor (the seed's BLOCKED), not a build
			// the next edit fixes.
			return sensor.Capture{}, sensor.Unrenderable(errors.Join(sensor.ErrNoSensor, runErr),
				"adapter %q: the project's %s could not be started (is it executable? chmod +x)", a.name, a.argv0)
		}
		if cmd.Process == nil {
			return sensor.Capture{}, sensor.Infrastructure(runErr, "adapter %q: start %s", a.name, a.path)
		}
		return sensor.Capture{}, sensor.Infrastructure(runErr, "adapter %q: wait for %s%s", a.name, a.path, stderr.suffix())
	}

	shot, err := a.readOutput(out, RenderFile)
	if err != nil {
		return sensor.Capture{}, sensor.Unrenderable(err, "adapter %q wrote no usable %s%s", a.name, RenderFile, stderr.suffix())
	}
	if err := a.checkPNG(shot); err != nil {
		return sensor.Capture{}, sensor.Unrenderable(err, "adapter %q: %s is not a valid PNG%s", a.name, RenderFile, stderr.suffix())
	}
	raw, err := a.readOutput(out, ProbeFile)
	if err != nil {
		return sensor.Capture{}, sensor.Unrenderable(err, "adapter %q wrote no usable %s%s", a.name, ProbeFile, stderr.suffix())
	}
	probe, err := sensor.TruncateJSON(raw, sensor.MaxLabel)
	if err != nil {
		return sensor.Capture{}, sensor.Unrenderable(err, "adapter %q: %s is not JSON%s", a.name, ProbeFile, stderr.suffix())
	}
	return sensor.Capture{PNG: shot, Probe: probe}, nil
}

// readOutput reads one output file. It must be a regular file (not a symlink the adapter
// planted to make the renderer read something else) within the size limit.
func (a *Adapter) readOutput(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", name, fi.Mode().Type())
	}
	if fi.Size() > a.opts.MaxOutput {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", name, fi.Size(), a.opts.MaxOutput)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, a.opts.MaxOutput+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > a.opts.MaxOutput {
		return nil, fmt.Errorf("%s grew over the %d-byte limit", name, a.opts.MaxOutput)
	}
	return data, nil
}

// checkPNG decodes the whole image, so that a truncated or corrupt file is caught here
// rather than by a judge, after checking its dimensions so decoding stays bounded.
func (a *Adapter) checkPNG(data []byte) error {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return fmt.Errorf("empty image %dx%d", cfg.Width, cfg.Height)
	}
	if cfg.Width > a.opts.MaxPixels/cfg.Height {
		return fmt.Errorf("image %dx%d is over the %d-pixel limit", cfg.Width, cfg.Height, a.opts.MaxPixels)
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		return err
	}
	return nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// suffix formats the tail for an error message, or "" when the adapter printed nothing.
func (w *tailWriter) suffix() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(w.buf), "\uFFFD"))
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}
