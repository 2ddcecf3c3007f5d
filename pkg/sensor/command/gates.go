package command

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Gates are the operator's gates commands by adapter name (the platform gates: build,
// lint, type_check, token_compliance, snapshot, flows). A job names the adapter; what runs
// is the operator's choice.
type Gates struct {
	Commands map[string]string
	Timeout  time.Duration
}

// GatesInput is what a gates command is asked about: one view of a feature.
type GatesInput struct {
	Spec, Probe               []byte
	Target, State, Appearance string
}

// Run invokes the adapter's gates command as
//
//	CMD --spec SPEC --target T --state S --appearance A --probe PROBE
//
// and returns what it printed (the gate statuses, for the caller to parse), or false when
// no command is registered for the adapter. The command's exit status says whether it ran,
// not whether the gates passed.
func (g *Gates) Run(ctx context.Context, adapter string, in GatesInput) ([]byte, bool, error) {
	if g == nil {
		return nil, false, nil
	}
	cmdPath, ok := g.Commands[adapter]
	if !ok {
		return nil, false, nil
	}
	dir, err := os.MkdirTemp("", "tribunal-gates-")
	if err != nil {
		return nil, true, err
	}
	defer os.RemoveAll(dir)
	specPath, probePath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "probe.json")
	if err := os.WriteFile(specPath, in.Spec, 0o600); err != nil {
		return nil, true, err
	}
	if err := os.WriteFile(probePath, in.Probe, 0o600); err != nil {
		return nil, true, err
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdPath, "--spec", specPath, "--target", in.Target, "--state", in.State, "--appearance", in.Appearance, "--probe", probePath)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, true, fmt.Errorf("gates adapter %s: %w: %s", adapter, err, tail(errb.String(), 500))
	}
	return out.Bytes(), true, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
