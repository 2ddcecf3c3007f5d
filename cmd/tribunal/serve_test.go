package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
)

// TestServeClusterFlags: `serve` refuses, with the reason and exit code 2, a cluster
// member without its server name, a route that is no nats:// address and a
// TRIBUNAL_REPLICAS that is no number; and services asked for three replicas on a
// standalone server say that it takes a cluster.
func TestServeClusterFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no server name", nil, []string{"serve", "nats", "--store", dir, "--listen", "127.0.0.1:0", "--cluster-listen", "127.0.0.1:0"}, "--server-name"},
		{"bad route", nil, []string{"serve", "nats", "--store", dir, "--listen", "127.0.0.1:0", "--server-name", "n1", "--cluster-listen", "127.0.0.1:0", "--routes", "127.0.0.1:6222"}, "want nats://host:port"},
		{"bad replicas", []string{"TRIBUNAL_REPLICAS=three"}, []string{"serve", "renderer", "--blob", "file://" + dir}, "TRIBUNAL_REPLICAS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary, tc.args...)
			cmd.Env = append(cmd.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("%v: %v, want exit 2 naming %q:\n%s", tc.args, err, tc.want, out)
			}
		})
	}
	srv := natstest.Start(t)
	_, stderr, code := run(t, dir, "serve", "renderer", "--nats", srv.URL, "--replicas", "3", "--blob", "file://"+dir, "--health", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "replicas 3 needs a JetStream cluster") {
		t.Fatalf("--replicas 3 on a standalone server: exit %d\n%s", code, stderr)
	}
}
