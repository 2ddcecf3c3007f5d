package deploy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tribunal-dev/tribunal/pkg/tenants"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// placeholderTokens are the settings of .env.example that ship a placeholder the
// deployment refuses to start with: each must be replaced before a first start.
var placeholderTokens = []string{"TRIBUNAL_CONSOLE_TOKEN", "TRIBUNAL_TEAM_TOKEN"}

// placeholderPasswords are the NATS users' passwords .env.example ships as placeholders.
func placeholderPasswords() []string {
	var out []string
	for _, u := range composeNATSUserList() {
		out = append(out, tenants.PasswordEnv(u))
	}
	return out
}

// stackEnv is .env.example as a user who followed its comments runs it: every token
// and NATS password placeholder replaced by a generated secret (a token as `tribunal
// tenants` writes it, a password of hex digits as its example's `openssl rand -hex 24`),
// as `cp .env.example .env` and the edit it asks for give. The shipped placeholders
// themselves are refused at start (TestShippedTokensAreRefused).
func stackEnv(t *testing.T) map[string]string {
	t.Helper()
	env := envExample(t)
	for _, k := range append(placeholderTokens, placeholderPasswords()...) {
		if _, ok := tokens.Placeholder(env[k]); !ok {
			t.Fatalf(".env.example: %s = %q is no placeholder any more: update placeholderTokens", k, env[k])
		}
		secret, err := tokens.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(k, "_PASSWORD") {
			b := make([]byte, 24)
			_, _ = rand.Read(b)
			secret = hex.EncodeToString(b)
		}
		env[k] = secret
	}
	return env
}

// operatorEnv is what a host command needs to reach the stack's NATS as the operator.
func operatorEnv(env map[string]string) []string {
	return []string{"TRIBUNAL_NATS_USER=" + tenants.OperatorUser, "TRIBUNAL_NATS_PASSWORD=" + env[tenants.PasswordEnv(tenants.OperatorUser)]}
}

// TestShippedTokensAreRefused: every token tribunal ships, in .env.example and in
// deploy/k8s/secrets.yaml's tokens files, reads as a placeholder, so a deployment
// started without replacing it is refused at start (pkg/tokens.Check) instead of
// admitting anyone who read the example.
func TestShippedTokensAreRefused(t *testing.T) {
	env := envExample(t)
	for _, k := range placeholderTokens {
		err := tokens.Check(map[string]string{env[k]: "default"})
		if err == nil || !strings.Contains(err.Error(), "placeholder") {
			t.Errorf(".env.example: %s = %q: %v, want it refused as a placeholder", k, env[k], err)
		}
	}
	objs, _ := manifests(t)
	seen := 0
	for _, o := range objs {
		s, ok := o.Obj.(*corev1.Secret)
		if !ok {
			continue
		}
		for key, v := range s.StringData {
			if key != "tokens.json" {
				continue
			}
			var m map[string]string
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				t.Fatalf("Secret/%s %s: %v", o.Name, key, err)
			}
			if err := tokens.Check(m); err == nil || !strings.Contains(err.Error(), "placeholder") {
				t.Errorf("Secret/%s %s: %v, want its placeholder refused", o.Name, key, err)
			}
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("%d tokens files among the Secrets, want the console's and the ingress's", seen)
	}
}
