// Package tenants writes the authorization of a tribunal shared by several teams.
//
// Teams hold no NATS user at all: a team that could publish on the shared account could
// make JetStream itself write anywhere (a publish's reply subject receives the stream's
// acknowledgement from inside the account, where the team's permissions do not apply),
// pre-empt another team's message ids, or write an envelope for another team. Teams reach
// tribunal through the ingress (pkg/ingress) with a bearer token each, from the tokens
// file this package writes; the ingress holds a NATS user of its own.
//
// The NATS users are the services', each with the least it needs (Grants, the one source
// of the config Generate writes and of the users table of docs/security.md): a service
// may publish only the event types it produces (bus.ServiceOutputs) and its own dead
// letters, consume and acknowledge only its own durables, and touch only the key-value
// buckets it reads or writes; only the aggregator reads stream messages. The ingress may
// publish only the event types a team originates (ingress.TeamTypes) and read batch
// state; the console publishes spot-checks and loop resets and reads the stream only
// through the stream readers' consumers (bus.ReadStream), never a service's. Every user
// reads only its own reply inbox (InboxPrefix). Operators' commands (direct submission,
// audit, redrive, rejudge) use the operator user, which may do anything.
package tenants

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// The NATS users the generated authorization admits besides one per service
// (ServiceUser).
const (
	// ServicesUser runs all four services in one process (`tribunal serve all`): the
	// union of the four services' rights.
	ServicesUser = "tribunal-services"
	// IngressUser is the ingress's.
	IngressUser = "tribunal-ingress"
	// ConsoleUser is the web console's: it reads batch state and the stream (audits,
	// through the stream readers) and publishes spot-checks and loop resets.
	ConsoleUser = "tribunal-console"
	// OperatorUser is the operators' own: direct submission, audit, redrive, rejudge.
	// It may do anything; keep its password with the people who run tribunal.
	OperatorUser = "tribunal-operator"
)

// ServiceUser is the NATS user of one service ("tribunal-judge").
func ServiceUser(service string) string { return "tribunal-" + service }

// Account is the NATS account everything lives in.
const Account = "TRIBUNAL"

// InboxPrefix is the reply-inbox prefix a generated user's connection must use
// (nats.CustomInboxPrefix), the only inbox its permissions let it read, so no user can
// read the replies to another's requests.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// Generated reports whether user is one this package generates (whose connection must
// use InboxPrefix).
func Generated(user string) bool {
	return slices.Contains([]string{ServicesUser, IngressUser, ConsoleUser, OperatorUser}, user) ||
		slices.ContainsFunc(bus.Services, func(svc string) bool { return user == ServiceUser(svc) })
}

// Credential is one user's name and password.
type Credential struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// Options tune Generate.
type Options struct {
	// Passwords are existing users' passwords, kept so that re-running keeps running
	// processes working; missing ones are generated.
	Passwords map[string]string
	// Tokens is an existing tokens file ({"<token>": "<tenant>"}): a listed team keeps
	// its token and its reviewers' ("<tenant>:reviewer"), an operator's console token
	// ("*") is kept, a team no longer listed loses its tokens.
	Tokens map[string]string
	// Reviewers are the teams to issue a new reviewer's token to (tokens.RoleReviewer),
	// one per entry: a team named twice gets two, for two people. Each must be listed.
	Reviewers []string
	// Stream is tribunal's stream ("TRIBUNAL" if empty).
	Stream string
}

// Result is an authorization config, the credentials it admits and the teams' tokens.
type Result struct {
	// Config is nats-server configuration text (an accounts block).
	Config string
	// Credentials has one entry per NATS user. Passwords are stored in the config only
	// as bcrypt hashes.
	Credentials []Credential
	// Tokens is the tokens file of the ingress and the console: one token per team, and
	// the reviewers' tokens.
	Tokens map[string]string
	// NewReviewers are the reviewer's tokens this run issued (Options.Reviewers), in
	// that order.
	NewReviewers []string
	// Permissions are each user's, as written into Config.
	Permissions map[string]Permissions
}

// Permissions are the subjects a user may publish to and subscribe to.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// Generate writes the authorization of a tribunal shared by teams.
func Generate(teams []string, o Options) (Result, error) {
	seen := map[string]bool{}
	for _, t := range teams {
		if err := events.ValidateTenant(t); err != nil {
			return Result{}, fmt.Errorf("team: %w", err)
		}
		if seen[t] {
			return Result{}, fmt.Errorf("team %q listed twice", t)
		}
		seen[t] = true
	}
	if o.Stream == "" {
		o.Stream = "TRIBUNAL"
	}
	sorted := append([]string(nil), teams...)
	sort.Strings(sorted)
	r := Result{Tokens: map[string]string{}, Permissions: permissions(sorted, o.Stream)}
	has := map[string]bool{}
	for tok, tenant := range o.Tokens {
		if h, err := tokens.ParseHolder(tenant); err == nil && h.Role == tokens.RoleReviewer && seen[h.Tenant] {
			r.Tokens[tok] = tenant
			continue
		}
		if tenant == tokens.AllTenants || seen[tenant] && !has[tenant] {
			r.Tokens[tok] = tenant
			has[tenant] = true
		}
	}
	for _, t := range o.Reviewers {
		if !seen[t] {
			return Result{}, fmt.Errorf("reviewer of team %q: not one of the teams listed", t)
		}
		tok, err := tokens.Generate()
		if err != nil {
			return Result{}, err
		}
		r.Tokens[tok] = tokens.ReviewerOf(t)
		r.NewReviewers = append(r.NewReviewers, tok)
	}
	for _, t := range sorted {
		if has[t] {
			continue
		}
		tok, err := tokens.Generate()
		if err != nil {
			return Result{}, err
		}
		r.Tokens[tok] = t
	}
	if err := tokens.Check(r.Tokens); err != nil {
		return Result{}, fmt.Errorf("tokens: %w", err)
	}

	header := fmt.Sprintf("# Generated by `tribunal tenants %s`: the services' NATS users, each with the least it\n", strings.Join(sorted, " ")) +
		"# needs. Teams have no NATS user: they reach tribunal through the ingress with a token.\n"
	config, err := writeConfig(header, users(), r.Permissions, func(user string) (string, error) {
		pw := o.Passwords[user]
		if pw == "" {
			var err error
			if pw, err = newPassword(); err != nil {
				return "", err
			}
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
		if err != nil {
			return "", fmt.Errorf("hash password of %s: %w", user, err)
		}
		r.Credentials = append(r.Credentials, Credential{User: user, Password: pw})
		return fmt.Sprintf("%q", string(hash)), nil
	})
	if err != nil {
		return Result{}, err
	}
	r.Config = config
	return r, nil
}

// writeConfig is the nats-server configuration of users with perms, each user's
// password value as password gives it (a quoted hash, or a variable reference).
func writeConfig(header string, users []string, perms map[string]Permissions, password func(user string) (string, error)) (string, error) {
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "accounts {\n  %s {\n    jetstream: enabled\n    users: [\n", Account)
	for _, user := range users {
		pw, err := password(user)
		if err != nil {
			return "", err
		}
		p := perms[user]
		fmt.Fprintf(&b, "      {\n        user: %q\n        password: %s\n        permissions: {\n", user, pw)
		fmt.Fprintf(&b, "          publish: { allow: %s }\n", list(p.Publish))
		fmt.Fprintf(&b, "          subscribe: { allow: %s }\n", list(p.Subscribe))
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String(), nil
}

// PasswordEnv is the environment variable that holds user's password where the
// authorization refers to passwords instead of holding their hashes (EnvConfig):
// TRIBUNAL_NATS_<USER>_PASSWORD, the user's name without "tribunal-", upper case
// ("TRIBUNAL_NATS_RENDERER_PASSWORD" for tribunal-renderer).
func PasswordEnv(user string) string {
	name := strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(user, "tribunal-"), "-", "_"))
	return "TRIBUNAL_NATS_" + name + "_PASSWORD"
}

// EnvConfig is the authorization of users that Generate writes for no team, the
// services consuming their shared durables (no --tenants), with each password a
// reference to the server's environment variable PasswordEnv(user) instead of a hash:
// a configuration holding no secret, which docker-compose.yml mounts as it is while .env
// gives the server and each service its password. nats-server reads a referenced value
// as a configuration value, so a password must be letters and digits (what `openssl rand
// -hex` prints): a leading '-', a space or digits only are not read as a string.
func EnvConfig(users []string, stream string) (string, error) {
	if stream == "" {
		stream = "TRIBUNAL"
	}
	for _, u := range users {
		if !Generated(u) {
			return "", fmt.Errorf("user %q: not one of the generated users", u)
		}
	}
	header := "# Generated by pkg/tenants (EnvConfig) for docker-compose.yml: the NATS users of its services,\n" +
		"# each with the least it needs (docs/security.md). It holds no secret: every password is the\n" +
		"# server's environment variable of that name, which docker-compose.yml sets from .env.\n" +
		"# `go test ./deploy -run TestComposeNATSAuthorization -update-nats-auth` rewrites this file.\n"
	return writeConfig(header, users, permissions(nil, stream), func(user string) (string, error) {
		return "$" + PasswordEnv(user), nil
	})
}

// users lists every generated user, in the config's order.
func users() []string {
	out := []string{OperatorUser, ServicesUser}
	for _, svc := range bus.Services {
		out = append(out, ServiceUser(svc))
	}
	return append(out, IngressUser, ConsoleUser)
}

// permissions are every generated user's, by Grants.
func permissions(teams []string, stream string) map[string]Permissions {
	return expand(Grants(stream), teams)
}

func list(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func newPassword() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
