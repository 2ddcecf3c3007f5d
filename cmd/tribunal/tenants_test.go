package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// TestTenantsWritesKEDAPatch: `tribunal tenants --keda` writes one trigger per team's
// judge consumer beside the NATS authorization.
func TestTenantsWritesKEDAPatch(t *testing.T) {
	dir := t.TempDir()
	keda := filepath.Join(dir, "keda-tenants.yaml")
	stdout, stderr, code := run(t, dir, "tenants", "team-a", "team-b", "--out", filepath.Join(dir, "auth.conf"),
		"--credentials", filepath.Join(dir, "credentials.json"), "--tokens", filepath.Join(dir, "tokens.json"), "--keda", keda, "--keda-namespace", "judging")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	// The teams' tokens, the only credential a team holds, in the ingress's format.
	toks, err := tokens.Load(filepath.Join(dir, "tokens.json"))
	if err != nil || len(toks) != 2 {
		t.Fatalf("tokens.json: %v %v", toks, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "tokens.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("tokens.json mode %v (%v), want 0600", st.Mode(), err)
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

// TestTenantsRefusesReservedNames: `tribunal tenants dlq` was accepted on de157a3 and
// the team was never served (its durable was the aggregator's dead-letter durable).
func TestTenantsRefusesReservedNames(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, code := run(t, dir, "tenants", "team-a", "dlq", "--out", filepath.Join(dir, "auth.conf"),
		"--credentials", filepath.Join(dir, "credentials.json"), "--tokens", filepath.Join(dir, "tokens.json"))
	if code != 2 || !strings.Contains(stderr, `tenant "dlq": reserved`) {
		t.Fatalf("exit %d: %s %s; want 2 naming the reserved tenant", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokens.json")); !os.IsNotExist(err) {
		t.Errorf("tokens.json written for a refused team list: %v", err)
	}
}

// TestTenantsIssuesReviewerTokens: `tribunal tenants --reviewer team-a=FILE` issues a
// reviewer's token of team-a into the tokens file and FILE (mode 0600), names whom its
// reviews will be by, and a re-run keeps it.
func TestTenantsIssuesReviewerTokens(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "alice.token")
	args := []string{"tenants", "team-a", "--out", filepath.Join(dir, "auth.conf"), "--credentials", filepath.Join(dir, "credentials.json"), "--tokens", filepath.Join(dir, "tokens.json")}
	stdout, stderr, code := run(t, dir, append(args, "--reviewer", "team-a="+file)...)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	data, err := os.ReadFile(file)
	if st, _ := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v", file, err, st.Mode())
	}
	tok := strings.TrimSpace(string(data))
	toks, err := tokens.Load(filepath.Join(dir, "tokens.json"))
	if err != nil || toks[tok] != "team-a:reviewer" || len(toks) != 2 {
		t.Fatalf("tokens.json: %v %v", toks, err)
	}
	if want := "its reviews are by " + ingress.Reviewer("team-a", tok); !strings.Contains(stdout, want) {
		t.Errorf("stdout %q lacks %q", stdout, want)
	}
	if _, _, code := run(t, dir, args...); code != 0 {
		t.Fatal("re-run failed")
	}
	if again, _ := tokens.Load(filepath.Join(dir, "tokens.json")); again[tok] != "team-a:reviewer" {
		t.Errorf("the reviewer's token was dropped on re-running: %v", again)
	}
}
