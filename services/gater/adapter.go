package gater

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/argus"
)

// GatesAdapters are the operator's gates commands by adapter name (the platform gates:
// build, lint, type_check, token_compliance, snapshot, flows). A job names the adapter;
// what runs is the operator's choice.
type GatesAdapters struct {
	Commands map[string]string
	Timeout  time.Duration
}

// WithGatesAdapters sets the operator's gates commands.
func (s *Service) WithGatesAdapters(g *GatesAdapters) *Service {
	s.adapters = g
	return s
}

// run invokes the adapter's gates command as
//
//	CMD --spec SPEC --target T --state S --appearance A --probe PROBE
//
// and parses the gate statuses it prints. The command's exit status says whether it
// ran, not whether the gates passed; output that is not the expected JSON is an error
// for the operator, never a green gate.
func (g *GatesAdapters) run(ctx context.Context, adapter string, spec, probe []byte, target, state, appearance string) (argus.AdapterGates, error) {
	if g == nil {
		return argus.AdapterGates{}, nil
	}
	cmdPath, ok := g.Commands[adapter]
	if !ok {
		return argus.AdapterGates{}, nil
	}
	dir, err := os.MkdirTemp("", "tribunal-gates-")
	if err != nil {
		return argus.AdapterGates{}, err
	}
	defer os.RemoveAll(dir)
	specPath, probePath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "probe.json")
	if err := os.WriteFile(specPath, spec, 0o600); err != nil {
		return argus.AdapterGates{}, err
	}
	if err := os.WriteFile(probePath, probe, 0o600); err != nil {
		return argus.AdapterGates{}, err
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdPath, "--spec", specPath, "--target", target, "--state", state, "--appearance", appearance, "--probe", probePath)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return argus.AdapterGates{}, fmt.Errorf("gates adapter %s: %w: %s", adapter, err, tail(errb.String(), 500))
	}
	gates, err := argus.ParseAdapterGates(out.Bytes())
	if err != nil {
		return argus.AdapterGates{}, fmt.Errorf("gates adapter %s: %w", adapter, err)
	}
	return gates, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
