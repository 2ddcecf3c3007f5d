// Package tokens is the bearer-token authentication the console and the ingress share.
// A tokens file is a JSON object {"<token>": "<holder>"}: a holder "<tenant>" is a team's
// token, "<tenant>:reviewer" a reviewer's of that team (RoleReviewer: the ingress and the
// console let it only read the team's blind review queue and answer it), and AllTenants an operator's
// (the console shows it every team; the ingress refuses it, since operators reach NATS
// directly). A token is the only thing between a team and another team's work, so it must
// be long and random (Generate).
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

// Role is what a token's holder is to its tenant.
type Role string

// The roles of a token.
const (
	// RoleTeam is the team itself: it submits, reads its results, reviews and exports.
	RoleTeam Role = "team"
	// RoleReviewer is one of the team's reviewers: the ingress lets it read the team's
	// review queue blind and answer it, nothing else (pkg/ingress's Routes).
	RoleReviewer Role = "reviewer"
)

// Roles are every role, in the order the rights are documented.
var Roles = []Role{RoleTeam, RoleReviewer}

// reviewerSuffix marks a reviewer's holder: a tenant name holds no ':'.
const reviewerSuffix = ":" + string(RoleReviewer)

// Holder is who a token stands for: a tenant (AllTenants for an operator) and the
// holder's role there.
type Holder struct {
	Tenant string
	Role   Role
}

// ParseHolder reads a tokens file's value: "<tenant>" (RoleTeam), "<tenant>:reviewer"
// (RoleReviewer) or AllTenants (an operator's, RoleTeam).
func ParseHolder(v string) (Holder, error) {
	if t, ok := strings.CutSuffix(v, reviewerSuffix); ok {
		if t == AllTenants {
			return Holder{}, fmt.Errorf("holder %q: a reviewer is one team's, not every team's", v)
		}
		if err := events.ValidateTenant(t); err != nil {
			return Holder{}, fmt.Errorf("holder %q: %w", v, err)
		}
		return Holder{Tenant: t, Role: RoleReviewer}, nil
	}
	if v != AllTenants {
		if err := events.ValidateTenant(v); err != nil {
			return Holder{}, fmt.Errorf("holder %q: want \"<team>\", \"<team>:reviewer\" or \"*\": %w", v, err)
		}
	}
	return Holder{Tenant: v, Role: RoleTeam}, nil
}

// String is the holder as a tokens file writes it.
func (h Holder) String() string {
	if h.Role == RoleReviewer {
		return h.Tenant + reviewerSuffix
	}
	return h.Tenant
}

// Reviewer names the holder of a token of tenant as every review they record names them,
// whatever door it came through (the ingress, a shared console; the door is the review's
// via): the tenant and a fingerprint of the token, so two people of one team with tokens
// of their own are two reviewers, one person answering through both doors is one (the
// later answer replaces the earlier, recorded as a change) and nobody names themselves.
// Reviews recorded before the doors shared it name "ingress:<name>" or "console:<name>":
// those stay reviewers of their own.
func Reviewer(tenant, token string) string {
	return tenant + " (token " + Fingerprint(token) + ")"
}

// Fingerprint identifies a token without disclosing it: the first 4 bytes of its SHA-256,
// in hex.
func Fingerprint(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:4])
}

// ReviewerOf is the tokens file's value of a reviewer's token of tenant.
func ReviewerOf(tenant string) string { return Holder{Tenant: tenant, Role: RoleReviewer}.String() }

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
		return nil, fmt.Errorf("tokens %s: want a JSON object {\"<token>\": \"<tenant>\" or \"<tenant>:reviewer\"}: %w", path, err)
	}
	if err := Check(m); err != nil {
		return nil, fmt.Errorf("tokens %s: %w", path, err)
	}
	return m, nil
}

// Check validates a token map: long enough tokens without surrounding spaces, none of
// them a placeholder (Placeholder), each mapping to a holder ParseHolder reads.
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
		if _, err := ParseHolder(tenant); err != nil {
			return err
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

// Set resolves presented tokens to their holder. It keeps only the tokens' SHA-256, so a
// lookup never compares the secret itself byte by byte.
type Set struct {
	m map[[32]byte]Holder
}

// NewSet builds a Set from a token map (Load's, so Check's: a value ParseHolder does not
// read is left out, and its token is unknown).
func NewSet(m map[string]string) *Set {
	s := &Set{m: make(map[[32]byte]Holder, len(m))}
	for tok, v := range m {
		if h, err := ParseHolder(v); err == nil {
			s.m[sha256.Sum256([]byte(tok))] = h
		}
	}
	return s
}

// Len is the number of tokens.
func (s *Set) Len() int { return len(s.m) }

// Tenant is the tenant of a presented team's token (AllTenants for an operator's). A
// reviewer's token is unknown to it: a reader that does not ask for the role (Holder) must
// not give a reviewer the team's rights.
func (s *Set) Tenant(tok string) (string, bool) {
	h, ok := s.Holder(tok)
	if !ok || h.Role != RoleTeam {
		return "", false
	}
	return h.Tenant, true
}

// Holder is who a presented token stands for, whatever its role.
func (s *Set) Holder(tok string) (Holder, bool) {
	if tok == "" {
		return Holder{}, false
	}
	h, ok := s.m[sha256.Sum256([]byte(tok))]
	return h, ok
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
