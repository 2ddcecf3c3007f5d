package tokens

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "tokens.json")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, err := Load(write(`{"aaaaaaaaaaaaaaaaaaaa": "team-a", "bbbbbbbbbbbbbbbbbbbb": "*"}`))
	if err != nil || m["aaaaaaaaaaaaaaaaaaaa"] != "team-a" || m["bbbbbbbbbbbbbbbbbbbb"] != AllTenants {
		t.Fatalf("%v %v", m, err)
	}
	if m, err := Load(""); m != nil || err != nil {
		t.Fatalf("no file: %v %v", m, err)
	}
	for name, body := range map[string]string{
		"short token":       `{"short": "team-a"}`,
		"surrounding space": `{" aaaaaaaaaaaaaaaaaaaa": "team-a"}`,
		"bad tenant":        `{"aaaaaaaaaaaaaaaaaaaa": "Team A"}`,
		"dotted tenant":     `{"aaaaaaaaaaaaaaaaaaaa": "team.a"}`,
		"not an object":     `["aaaaaaaaaaaaaaaaaaaa"]`,
	} {
		if _, err := Load(write(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSetAndBearer(t *testing.T) {
	t.Parallel()
	tok, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Generate()
	if len(tok) < MinLength || tok == other {
		t.Fatalf("generated %q and %q", tok, other)
	}
	if err := Check(map[string]string{tok: "team-a"}); err != nil {
		t.Fatalf("a generated token fails Check: %v", err)
	}
	s := NewSet(map[string]string{tok: "team-a"})
	if tenant, ok := s.Tenant(tok); !ok || tenant != "team-a" || s.Len() != 1 {
		t.Fatalf("Tenant(own token) = %q %v", tenant, ok)
	}
	for _, bad := range []string{"", other, tok[:len(tok)-1]} {
		if _, ok := s.Tenant(bad); ok {
			t.Errorf("token %q accepted", bad)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	if _, present, _ := Bearer(r); present {
		t.Error("no header reads as present")
	}
	r.Header.Set("Authorization", "Bearer  "+tok+" ")
	if got, present, ok := Bearer(r); !present || !ok || got != tok {
		t.Errorf("Bearer = %q %v %v", got, present, ok)
	}
	r.Header.Set("Authorization", "Basic "+tok)
	if _, present, ok := Bearer(r); !present || ok {
		t.Error("a Basic header reads as a bearer token")
	}
}

// TestCheckRefusesReservedTenants: a team "dlq" once shared the aggregator's dead-letter
// durable's name and was never served; its token is refused at start.
func TestCheckRefusesReservedTenants(t *testing.T) {
	for _, r := range events.ReservedTenants {
		err := Check(map[string]string{"a-long-enough-token-0123456789abcdef": r})
		if err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("tenant %q: %v, want reserved", r, err)
		}
	}
}

// TestCheckRefusesPlaceholders: the placeholders tribunal ships in deploy/k8s/secrets.yaml
// and .env.example, and others like them, are refused with what to do; generated tokens
// never read like one.
func TestCheckRefusesPlaceholders(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"REPLACE-WITH-A-LONG-RANDOM-TOKEN", "REPLACE-WITH-TEAM-A-TOKEN-FROM-TRIBUNAL-TENANTS",
		"change-me-to-a-long-random-token", "change-me-to-a-long-random-team-token", "CHANGE_ME_PLEASE_0123456789",
		"changeme-changeme-changeme", "<placeholder-for-the-token>", "your-token-goes-here-0123"} {
		err := Check(map[string]string{tok: "team-a"})
		if err == nil {
			t.Errorf("%q accepted", tok)
			continue
		}
		for _, want := range []string{"placeholder", `"team-a"`, "tribunal tenants", ".env", "Secret"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want it to say %q", tok, err, want)
			}
		}
		if strings.Contains(err.Error(), tok) {
			t.Errorf("%q: the error repeats the token: %v", tok, err)
		}
	}
	for range 1000 {
		tok, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := Placeholder(tok); ok {
			t.Fatalf("generated token %q reads like a placeholder (%q)", tok, m)
		}
	}
	p := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(p, []byte(`{"change-me-to-a-long-random-token": "*"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("Load: %v, want the file named and the placeholder refused", err)
	}
}

// TestReviewerTokens: a reviewer's token ("<team>:reviewer") is its team's with the
// reviewer's role; Tenant, for a reader that knows no roles, does not know it, so it
// never gets the team's rights there.
func TestReviewerTokens(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]Holder{
		"team-a":          {Tenant: "team-a", Role: RoleTeam},
		"team-a:reviewer": {Tenant: "team-a", Role: RoleReviewer},
		AllTenants:        {Tenant: AllTenants, Role: RoleTeam},
	} {
		h, err := ParseHolder(v)
		if err != nil || h != want || h.String() != v {
			t.Errorf("ParseHolder(%q) = %+v %v, want %+v", v, h, err, want)
		}
	}
	for _, bad := range []string{"*:reviewer", "team-a:admin", "Team A:reviewer", ":reviewer", "dlq:reviewer"} {
		if _, err := ParseHolder(bad); err == nil {
			t.Errorf("ParseHolder(%q) accepted", bad)
		}
		if err := Check(map[string]string{"a-long-enough-token-0123456789abcdef": bad}); err == nil {
			t.Errorf("Check accepted holder %q", bad)
		}
	}
	team, reviewer := "team-token-0123456789abcdef", "reviewer-token-0123456789abcdef"
	s := NewSet(map[string]string{team: "team-a", reviewer: ReviewerOf("team-a")})
	if tenant, ok := s.Tenant(team); !ok || tenant != "team-a" {
		t.Errorf("Tenant(team's) = %q %v", tenant, ok)
	}
	if tenant, ok := s.Tenant(reviewer); ok {
		t.Errorf("Tenant(reviewer's) = %q: a reader that knows no roles would give it the team's rights", tenant)
	}
	if h, ok := s.Holder(reviewer); !ok || h != (Holder{Tenant: "team-a", Role: RoleReviewer}) {
		t.Errorf("Holder(reviewer's) = %+v %v", h, ok)
	}
}

// TestReviewer: a token's holder is named by the tenant and the token's fingerprint alone,
// so the ingress and the console, which both call it, name one token's holder alike.
func TestReviewer(t *testing.T) {
	a, b := "reviewer-token-ann-0123456789abcdef", "reviewer-token-bob-0123456789abcdef"
	if got, want := Reviewer("team-a", a), "team-a (token "+Fingerprint(a)+")"; got != want {
		t.Errorf("Reviewer = %q, want %q", got, want)
	}
	if len(Fingerprint(a)) != 8 || Fingerprint(a) == Fingerprint(b) || Reviewer("team-a", a) == Reviewer("team-a", b) {
		t.Errorf("two tokens, one name: %q %q", Reviewer("team-a", a), Reviewer("team-a", b))
	}
	if strings.Contains(Reviewer("team-a", a), a) {
		t.Error("the name discloses the token")
	}
}
