package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTenantsWritesKEDAPatch: `tribunal tenants --keda` writes one trigger per team's
// judge consumer beside the NATS authorization.
func TestTenantsWritesKEDAPatch(t *testing.T) {
	dir := t.TempDir()
	keda := filepath.Join(dir, "keda-tenants.yaml")
	stdout, stderr, code := run(t, dir, "tenants", "team-a", "team-b", "--out", filepath.Join(dir, "auth.conf"),
		"--credentials", filepath.Join(dir, "credentials.json"), "--keda", keda, "--keda-namespace", "judging")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	data, err := os.ReadFile(keda)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"consumer: tribunal-judge-team-a", "consumer: tribunal-judge-team-b", "nats.judging.svc.cluster.local:8222",
		`account: "TRIBUNAL"`, `formula: "lag_team_a + lag_team_b"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q:\n%s", keda, want, data)
		}
	}
}
