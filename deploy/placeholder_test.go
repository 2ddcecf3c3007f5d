package deploy

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// placeholderTokens are the settings of .env.example that ship a placeholder the
// deployment refuses to start with: each must be replaced before a first start.
var placeholderTokens = []string{"TRIBUNAL_CONSOLE_TOKEN", "TRIBUNAL_TEAM_TOKEN"}

// stackEnv is .env.example as a user who followed its comments runs it: every token
// placeholder replaced by a generated token, as `cp .env.example .env` and the edit it
// asks for give. The shipped placeholders themselves are refused at start
// (TestShippedTokensAreRefused).
func stackEnv(t *testing.T) map[string]string {
	t.Helper()
	env := envExample(t)
	for _, k := range placeholderTokens {
		if _, ok := tokens.Placeholder(env[k]); !ok {
			t.Fatalf(".env.example: %s = %q is no placeholder any more: update placeholderTokens", k, env[k])
		}
		tok, err := tokens.Generate()
		if err != nil {
			t.Fatal(err)
		}
		env[k] = tok
	}
	return env
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
