// Package tokens is the bearer-token authentication the console and the ingress share.
// A tokens file is a JSON object {"<token>": "<tenant>"}: each token stands for one team,
// and a token mapped to AllTenants is an operator's (the console shows it every team; the
// ingress refuses it, since operators reach NATS directly). A token is the only thing
// between a team and another team's work, so it must be long and random (Generate).
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// MinLength is the shortest token Load accepts: a token must not be guessable.
const MinLength = 16

// AllTenants is the tenant a token maps to when it may see every tenant (an operator's
// or auditor's console token).
const AllTenants = "*"

// Load reads a tokens file. An empty path means no tokens (nil, nil).
func Load(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("tokens %s: want a JSON object {\"<token>\": \"<tenant>\"}: %w", path, err)
	}
	if err := Check(m); err != nil {
		return nil, fmt.Errorf("tokens %s: %w", path, err)
	}
	return m, nil
}

// Check validates a token map: long enough tokens without surrounding spaces, none of
// them a placeholder (Placeholder), each mapping to a valid tenant name or AllTenants.
func Check(m map[string]string) error {
	for tok, tenant := range m {
		if len(tok) < MinLength {
			return fmt.Errorf("a token of tenant %q is shorter than %d characters", tenant, MinLength)
		}
		if strings.TrimSpace(tok) != tok {
			return fmt.Errorf("a token of tenant %q has surrounding spaces", tenant)
		}
		if marker, ok := Placeholder(tok); ok {
			return fmt.Errorf("the token of tenant %q is a placeholder (it reads %q), not a secret: anyone who read the example knows it. "+
				"Put a long random token in its place: `tribunal tenants <team> --tokens tokens.json` writes them "+
				"(docker compose: TRIBUNAL_CONSOLE_TOKEN and TRIBUNAL_TEAM_TOKEN in .env; Kubernetes: the tribunal-console and tribunal-ingress Secrets)",
				tenant, marker)
		}
		if tenant != AllTenants {
			if err := events.ValidateTenant(tenant); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeholderMarkers are the words of the placeholders tribunal ships (deploy/k8s's
// "REPLACE-WITH-A-LONG-RANDOM-TOKEN", .env.example's "change-me-to-a-long-random-token")
// and the usual ones of other examples. A random token of Generate's 43 characters holds
// none of them by chance (the shortest, 7 letters, once in about 10^11 tokens).
var placeholderMarkers = []string{"replace-with", "replace-me", "change-me", "changeme", "placeholder", "your-token", "example-token"}

// Placeholder reports whether tok reads like a placeholder copied from an example
// instead of a secret, and the marker it holds. Case, '_' and spaces do not matter.
// The console and the ingress accepted the shipped placeholders as real tokens, so a
// deployment started unedited was open to anyone who had read the example.
func Placeholder(tok string) (marker string, ok bool) {
	norm := strings.NewReplacer("_", "-", " ", "-").Replace(strings.ToLower(tok))
	for _, m := range placeholderMarkers {
		if strings.Contains(norm, m) {
			return m, true
		}
	}
	return "", false
}

// Generate returns a new random token: 32 bytes from crypto/rand, base64url.
func Generate() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Set resolves presented tokens to their tenant. It keeps only the tokens' SHA-256, so a
// lookup never compares the secret itself byte by byte.
type Set struct {
	m map[[32]byte]string
}

// NewSet builds a Set from a token map (Load's).
func NewSet(m map[string]string) *Set {
	s := &Set{m: make(map[[32]byte]string, len(m))}
	for tok, tenant := range m {
		s.m[sha256.Sum256([]byte(tok))] = tenant
	}
	return s
}

// Len is the number of tokens.
func (s *Set) Len() int { return len(s.m) }

// Tenant is the tenant of a presented token (AllTenants for an operator's).
func (s *Set) Tenant(tok string) (string, bool) {
	if tok == "" {
		return "", false
	}
	tenant, ok := s.m[sha256.Sum256([]byte(tok))]
	return tenant, ok
}

// Bearer reads the token of an "Authorization: Bearer <token>" header. present says the
// request carries an Authorization header at all; ok that it is a bearer token.
func Bearer(r *http.Request) (tok string, present, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false, false
	}
	tok, ok = strings.CutPrefix(h, "Bearer ")
	return strings.TrimSpace(tok), true, ok
}
