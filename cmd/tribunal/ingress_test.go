package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// TestTeamThroughIngress is the shared deployment as an operator sets it up and a team
// uses it, every part a process: `tribunal tenants` writes the authorization and the
// tokens, NATS runs it, the services and the ingress each connect as their own user, and
// the team submits, watches and reads results holding nothing but its token (from a
// file, then from the environment).
func TestTeamThroughIngress(t *testing.T) {
	dir := t.TempDir()
	conf, creds, toks := filepath.Join(dir, "auth.conf"), filepath.Join(dir, "credentials.json"), filepath.Join(dir, "tokens.json")
	if _, stderr, code := run(t, dir, "tenants", "team-a", "team-b", "--out", conf, "--credentials", creds, "--tokens", toks); code != 0 {
		t.Fatalf("tenants exit %d: %s", code, stderr)
	}
	var list []tenants.Credential
	data, _ := os.ReadFile(creds)
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{}
	for _, c := range list {
		pw[c.User] = c.Password
	}
	teamTokens, err := tokens.Load(toks)
	if err != nil {
		t.Fatal(err)
	}
	var tokenA string
	for tok, team := range teamTokens {
		if team == "team-a" {
			tokenA = tok
		}
	}
	tokenFile := filepath.Join(dir, "team-a.token")
	if err := os.WriteFile(tokenFile, []byte(tokenA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	natsAddr, svcHealth, ingHealth, ingAddr := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	natsURL := "nats://" + natsAddr
	blobURL := "file://" + filepath.Join(dir, "blobs")
	start(t, "serve", "nats", "--listen", natsAddr, "--store", filepath.Join(dir, "nats"), "--config", conf)
	startWithEnv(t, []string{"TRIBUNAL_NATS_PASSWORD=" + pw[tenants.ServicesUser]},
		"serve", "all", "--nats", natsURL, "--nats-user", tenants.ServicesUser, "--blob", blobURL, "--health", svcHealth, "--tenants", "team-a,team-b")
	startWithEnv(t, []string{"TRIBUNAL_NATS_PASSWORD=" + pw[tenants.IngressUser]},
		"serve", "ingress", "--nats", natsURL, "--nats-user", tenants.IngressUser, "--blob", blobURL, "--health", ingHealth,
		"--tokens", toks, "--ingress-addr", ingAddr)
	waitHTTP(t, "http://"+svcHealth+"/readyz")
	waitHTTP(t, "http://"+ingHealth+"/readyz")
	ingressURL := "http://" + ingAddr

	// The quickstart names tenant "default"; through the ingress it is the token's.
	stdout, stderr, code := run(t, repoRoot(t), "submit", "examples/quickstart", "--ingress", ingressURL, "--token-file", tokenFile)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	batchID := strings.TrimSpace(stdout)
	watch := exec.Command(binary, "watch", "--batch", batchID, "--ingress", ingressURL)
	watch.Env = append(os.Environ(), "TRIBUNAL_TOKEN="+tokenA)
	out, err := watch.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "8 ACs, 6 compared, 2 blocked") {
		t.Fatalf("watch: %v\n%s", err, out)
	}
	resDir := t.TempDir()
	stdout, stderr, code = run(t, "", "results", "--batch", batchID, "--ingress", ingressURL, "--token-file", tokenFile, "--json", "--out", resDir)
	var res struct {
		Tenant  string `json:"tenant"`
		BatchID string `json:"batch_id"`
	}
	if code != 1 || json.Unmarshal([]byte(stdout), &res) != nil || res.BatchID != batchID || res.Tenant != "team-a" {
		t.Fatalf("results exit %d: %s %s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(resDir, batchID, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	// Asking for another tenant, or with another team's token, gets nothing.
	if _, stderr, code := run(t, "", "results", "--batch", batchID, "--ingress", ingressURL, "--token-file", tokenFile, "--tenant", "team-b"); code != 2 || !strings.Contains(stderr, "team-a") {
		t.Errorf("--tenant team-b with team-a's token: exit %d %s", code, stderr)
	}
	if _, _, code := run(t, "", "results", "--batch", batchID, "--ingress", ingressURL, "--token", "not-a-valid-token-of-anyone"); code != 2 {
		t.Errorf("an unknown token: exit %d, want 2", code)
	}
}
