package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServeRefusesPlaceholderTokens: the console and the ingress, given a tokens file
// holding a shipped placeholder (deploy/k8s/secrets.yaml's, .env.example's), exit 2 at
// once naming the file and what to do, before they reach NATS (none is running); so
// does a service or a client given .env.example's placeholder NATS password.
func TestServeRefusesPlaceholderTokens(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ service, tokens string }{
		{"console", `{"REPLACE-WITH-A-LONG-RANDOM-TOKEN": "*"}`},
		{"ingress", `{"REPLACE-WITH-TEAM-A-TOKEN-FROM-TRIBUNAL-TENANTS": "team-a"}`},
		{"console", `{"change-me-to-a-long-random-token": "*"}`},
		{"ingress", `{"change-me-to-a-long-random-team-token": "default"}`},
	} {
		file := filepath.Join(dir, tc.service+"-tokens.json")
		if err := os.WriteFile(file, []byte(tc.tokens), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := run(t, dir, "serve", tc.service, "--tokens", file, "--nats", "nats://127.0.0.1:1",
			"--connect-timeout", "1m", "--health", "127.0.0.1:0", "--blob", "file://"+dir)
		for _, want := range []string{file, "placeholder", "tribunal tenants"} {
			if code != 2 || !strings.Contains(stderr, want) {
				t.Errorf("serve %s with %s: exit %d, want 2 saying %q:\n%s", tc.service, tc.tokens, code, want, stderr)
			}
		}
	}
	for _, args := range [][]string{
		{"serve", "judge", "--nats-user", "tribunal-judge", "--health", "127.0.0.1:0", "--blob", "file://" + dir},
		{"watch", "--batch", "b", "--nats-user", "tribunal-operator", "--blob", "file://" + dir},
	} {
		_, stderr, code := runEnv(t, dir, []string{"TRIBUNAL_NATS_PASSWORD=change-me-nats-password", "TRIBUNAL_EPHEMERAL=true"},
			append(args, "--nats", "nats://127.0.0.1:1", "--connect-timeout", "1m")...)
		user := args[slices.Index(args, "--nats-user")+1]
		for _, want := range []string{"TRIBUNAL_NATS_PASSWORD", "placeholder", user} {
			if code != 2 || !strings.Contains(stderr, want) {
				t.Errorf("%v with a placeholder password: exit %d, want 2 saying %q:\n%s", args, code, want, stderr)
			}
		}
	}
}
