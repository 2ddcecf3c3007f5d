package main

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestHealthDefaultsToLoopback: `serve` (every service, the console and the ingress)
// answers /healthz, /readyz and /metrics on this machine only unless --health (or
// TRIBUNAL_HEALTH_ADDR, which deploy/ sets to ":8080" for pods) says otherwise, and the
// all-in-one serves none unless asked: run's --metrics has no default.
func TestHealthDefaultsToLoopback(t *testing.T) {
	for _, v := range []string{"TRIBUNAL_HEALTH_ADDR", "TRIBUNAL_HEALTH", "TRIBUNAL_METRICS", "TRIBUNAL_CONSOLE", "TRIBUNAL_VIEW_LISTEN"} {
		t.Setenv(v, "") // restored afterwards
		os.Unsetenv(v)
	}
	cmd, err := parsed(t, []string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	addr := cmd.Flags().Lookup("health").Value.String()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--health default %q: %v", addr, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		t.Errorf("serve --health defaults to %q, want a loopback address", addr)
	}
	for _, path := range [][]string{{"run"}, {"view"}} {
		cmd, err := parsed(t, path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"metrics", "health", "console", "listen"} {
			f := cmd.Flags().Lookup(name)
			if f == nil || f.DefValue == "" {
				continue
			}
			host, _, err := net.SplitHostPort(f.DefValue)
			if ip, perr := netip.ParseAddr(host); err != nil || perr != nil || !ip.IsLoopback() {
				t.Errorf("%s --%s defaults to %q, want nothing or a loopback address", path[0], name, f.DefValue)
			}
		}
	}
}
