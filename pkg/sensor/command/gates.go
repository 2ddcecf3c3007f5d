package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// DefaultGatesTimeout bounds one gates command: it commonly builds the app and runs its
// flow suite.
const DefaultGatesTimeout = 10 * time.Minute

// maxGatesOutput bounds what a gates command may print: a JSON object of a few gates.
const maxGatesOutput = 1 << 20

// Gates runs the platform gates of seed 004 (build, lint, type_check, token_compliance,
// snapshot, flows) for a view: the operator's command registered under the view's
// adapter name, else, in the all-in-one mode (Local), the project's own
// argus/adapters/{adapter}/gates.sh. A view is never gated on platform gates read as
// skipped while a gates adapter exists that this gater will not run: Run refuses it
// (ErrGatesBlocked) instead.
type Gates struct {
	// Commands are the operator's gates commands by adapter name; they override a
	// project's script of the same adapter.
	Commands map[string]string
	// Timeout bounds one run (DefaultGatesTimeout when zero).
	Timeout time.Duration
	// PassEnv names further variables passed to the commands (see Environ).
	PassEnv []string
	// Local runs the project's own gates.sh, and every gates command of a view with a
	// project in its project root on the real spec.json, as the seed's loop does. It is
	// for the all-in-one mode only; a shared gater leaves it false and runs only
	// Commands, in a folder of its own on a copy of the spec.
	Local bool
}

// GatesProject is what a view's job says of its project (rubricwire.Project): the
// project root, the spec's path and the gates script under it.
type GatesProject struct {
	// Root is the project root, absolute.
	Root string
	// Spec is spec.json relative to Root.
	Spec string
	// Gates is argus/adapters/{adapter}/gates.sh when the project ships it.
	Gates string
}

// GatesInput is what a gates command is asked about: one view of a feature.
type GatesInput struct {
	Spec, Probe               []byte
	Target, State, Appearance string
	// Project is nil when the job does not say what its project ships.
	Project *GatesProject
}

// GatesRun is what Run did.
type GatesRun struct {
	// Output is what the command printed (the gate statuses, for the caller to parse).
	Output []byte
	// Adapter names the command that ran (the project's script or the operator's
	// registration); "" when none ran.
	Adapter string
	// None says why no gates adapter ran, when none did: the reason each platform gate
	// reads skip.
	None string
}

// ErrGatesBlocked is wrapped when a view must not be gated here: its project ships a
// gates adapter this gater will not run, or its job does not say whether it ships one.
// Skipping the platform gates would open the judge's floor on gates nobody ran.
var ErrGatesBlocked = errclass.New(errclass.Unavailable, "platform gates cannot run here")

// Run finds and invokes the view's gates adapter as the seed's gates.sh does,
//
//	CMD --spec SPEC --target T --state S --appearance A --probe PROBE
//
// The command's exit status says whether it ran, not whether the gates passed: a non-zero
// exit, a timeout or an executable that cannot start is an error naming the adapter
// (the caller turns it into a failed build gate, never a green one). When no gates
// adapter exists at all, GatesRun.None says so and nothing runs.
func (g *Gates) Run(ctx context.Context, adapter string, in GatesInput) (GatesRun, error) {
	var cmdPath, argv0 string
	var registered bool
	if g != nil {
		cmdPath, registered = g.Commands[adapter]
	}
	local := g != nil && g.Local
	p := in.Project
	script := "argus/adapters/" + adapter + "/gates.sh"
	label, where := "", ""
	switch {
	case registered:
		// The label reaches the gate result the judge is shown, so it names no path; a
		// local error names the user's own script, which the operator's never is.
		label = "the gates command registered for " + adapter
		if local {
			where = label + " (" + cmdPath + ")"
		}
	case p == nil:
		return GatesRun{}, fmt.Errorf("%w: the job does not say whether its project ships %s, and this gater has no gates command registered for adapter %q: the view is not judged on platform gates read as skipped (submit it with a tribunal client that records the project, or register --gates-adapter %s=/path/to/gates.sh)",
			ErrGatesBlocked, script, adapter, adapter)
	case p.Gates != "" && local:
		cmdPath, argv0, label = filepath.Join(p.Root, filepath.FromSlash(p.Gates)), p.Gates, p.Gates
	case p.Gates != "":
		return GatesRun{}, fmt.Errorf("%w: the project ships %s, but this gater runs only the gates commands its operator registers and has none for adapter %q (--gates-adapter %s=/path/to/gates.sh): the view is not judged on platform gates read as skipped",
			ErrGatesBlocked, p.Gates, adapter, adapter)
	default:
		// None reaches the gate result the judge is shown, so it names no folder: a
		// path could tell the judge whose project it is looking at.
		return GatesRun{None: fmt.Sprintf("no gates adapter: the project ships no %s and no gates command is registered for adapter %q", script, adapter)}, nil
	}
	if where == "" {
		where = label
	}
	out, err := g.run(ctx, cmdPath, argv0, in)
	if err != nil {
		return GatesRun{Adapter: label}, fmt.Errorf("gates adapter %s: %w", where, err)
	}
	return GatesRun{Output: out, Adapter: label}, nil
}

// run invokes one gates command: in the project root on the real spec.json for a local
// view with a project, else in a folder of its own on a copy of the spec.
func (g *Gates) run(ctx context.Context, cmdPath, argv0 string, in GatesInput) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "tribunal-gates-")
	if err != nil {
		return nil, fmt.Errorf("create a folder for the probe: %w", err)
	}
	defer os.RemoveAll(tmp)
	probePath := filepath.Join(tmp, "probe.json")
	if err := os.WriteFile(probePath, in.Probe, 0o600); err != nil {
		return nil, fmt.Errorf("write the probe: %w", err)
	}
	dir, specPath := tmp, filepath.Join(tmp, "spec.json")
	if p := in.Project; g.Local && p != nil && p.Root != "" && p.Spec != "" {
		dir, specPath = p.Root, p.Spec
	} else if err := os.WriteFile(specPath, in.Spec, 0o600); err != nil {
		return nil, fmt.Errorf("write the spec: %w", err)
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = DefaultGatesTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, cmdPath, "--spec", specPath, "--target", in.Target, "--state", in.State, "--appearance", in.Appearance, "--probe", probePath)
	cmd.Dir = dir
	if argv0 != "" && in.Project != nil && dir == in.Project.Root {
		// The project's script runs as the seed's gates.sh starts it, by its path from
		// the project root, so it sees the same $0.
		cmd.Path, cmd.Args[0] = argv0, argv0
	}
	cmd.Env = Environ(g.PassEnv, nil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out := &limitWriter{max: maxGatesOutput}
	stderr := &tailWriter{max: stderrTail}
	cmd.Stdout, cmd.Stderr = out, stderr
	runErr := cmd.Run()
	if cmd.Process != nil {
		// Whatever the command left running in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("did not finish within %s%s", timeout, stderr.suffix())
	case runErr != nil:
		return nil, fmt.Errorf("%w%s", runErr, stderr.suffix())
	case out.over:
		return nil, fmt.Errorf("printed more than %d bytes", maxGatesOutput)
	}
	return out.buf.Bytes(), nil
}

// limitWriter keeps up to max bytes and notes that more came.
type limitWriter struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		w.over = true
		return len(p), nil
	}
	return w.buf.Write(p)
}
