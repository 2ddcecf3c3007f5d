// Package tenants writes the authorization of a tribunal shared by several teams.
//
// Teams hold no NATS user at all: a team that could publish on the shared account could
// make JetStream itself write anywhere (a publish's reply subject receives the stream's
// acknowledgement from inside the account, where the team's permissions do not apply),
// pre-empt another team's message ids, or write an envelope for another team. Teams reach
// tribunal through the ingress (pkg/ingress) with a bearer token each, from the tokens
// file this package writes; the ingress holds a NATS user of its own.
//
// The NATS users are the services', each with the least it needs: a service may publish
// only the event types it produces (bus.ServiceOutputs) and its own dead letters, consume
// and acknowledge only its own durables, and touch only the key-value buckets it reads or
// writes. The ingress may publish only the event types a team originates
// (ingress.TeamTypes) and read batch state. Every user reads only its own reply inbox
// (InboxPrefix). Operators' commands (direct submission, audit, redrive, rejudge) use the
// operator user, which may do anything.
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
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
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
	// ConsoleUser is the web console's: it reads batch state and the stream (audits) and
	// publishes spot-checks.
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
	// its token, an operator's console token ("*") is kept, a team no longer listed loses
	// its token.
	Tokens map[string]string
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
	// Tokens is the tokens file of the ingress and the console: one token per team.
	Tokens map[string]string
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
		if tenant == tokens.AllTenants || seen[tenant] && !has[tenant] {
			r.Tokens[tok] = tenant
			has[tenant] = true
		}
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

	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by `tribunal tenants %s`: the services' NATS users, each with the least it\n", strings.Join(sorted, " "))
	b.WriteString("# needs. Teams have no NATS user: they reach tribunal through the ingress with a token.\n")
	fmt.Fprintf(&b, "accounts {\n  %s {\n    jetstream: enabled\n    users: [\n", Account)
	for _, user := range users() {
		pw := o.Passwords[user]
		if pw == "" {
			var err error
			if pw, err = newPassword(); err != nil {
				return Result{}, err
			}
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
		if err != nil {
			return Result{}, fmt.Errorf("hash password of %s: %w", user, err)
		}
		r.Credentials = append(r.Credentials, Credential{User: user, Password: pw})
		p := r.Permissions[user]
		fmt.Fprintf(&b, "      {\n        user: %q\n        password: %q\n        permissions: {\n", user, string(hash))
		fmt.Fprintf(&b, "          publish: { allow: %s }\n", list(p.Publish))
		fmt.Fprintf(&b, "          subscribe: { allow: %s }\n", list(p.Subscribe))
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	r.Config = b.String()
	return r, nil
}

// users lists every generated user, in the config's order.
func users() []string {
	out := []string{OperatorUser, ServicesUser}
	for _, svc := range bus.Services {
		out = append(out, ServiceUser(svc))
	}
	return append(out, IngressUser, ConsoleUser)
}

// serviceBuckets are the key-value buckets each service reads and writes, and those it
// only reads.
var (
	serviceWrites = map[string][]string{
		bus.Renderer: {bus.BucketCache, ratelimit.DefaultBucket},
		bus.Judge:    {bus.BucketCache, ratelimit.DefaultBucket},
		// The aggregator keeps each tenant's judge flip history in the cache bucket
		// (ab.flips.<tenant>), which positions: auto reads.
		bus.Aggregator: {bus.BucketJobs, bus.BucketBatches, bus.BucketViews, bus.BucketCache},
	}
	serviceReads = map[string][]string{
		bus.Gater: {bus.BucketViews},
	}
	// provisioned are the buckets every service creates or updates at start (bus.Provision,
	// bus.Elect; ratelimit.New in the processes that call a model).
	provisioned = []string{bus.BucketJobs, bus.BucketBatches, bus.BucketCache, bus.BucketViews, bus.BucketLeases, ratelimit.DefaultBucket}
)

// permissions are every generated user's.
func permissions(teams []string, stream string) map[string]Permissions {
	out := map[string]Permissions{
		OperatorUser: {Publish: []string{">"}, Subscribe: []string{">"}},
	}
	var all Permissions
	for _, svc := range bus.Services {
		p := servicePermissions(svc, teams, stream)
		p.Subscribe = []string{InboxPrefix(ServiceUser(svc)) + ".>"}
		out[ServiceUser(svc)] = p
		all.Publish = append(all.Publish, p.Publish...)
	}
	all.Publish = dedup(all.Publish)
	all.Subscribe = []string{InboxPrefix(ServicesUser) + ".>"}
	out[ServicesUser] = all

	// The ingress publishes the events a team originates, and reads batch state and the
	// stream's message it must compare with a duplicate acknowledgement.
	ing := []string{api("STREAM.INFO", stream), api("STREAM.MSG.GET", stream)}
	for _, t := range ingress.TeamTypes() {
		ing = append(ing, events.AnyTenant(t))
	}
	ing = append(ing, bucketInfo(bus.BucketJobs, bus.BucketBatches, bus.BucketCache, bus.BucketViews)...)
	ing = append(ing, bucketRead(bus.BucketJobs, bus.BucketBatches)...)
	out[IngressUser] = Permissions{Publish: ing, Subscribe: []string{InboxPrefix(IngressUser) + ".>"}}

	// The console reads batch state and replays the stream for audits, and publishes
	// spot-checks.
	con := []string{events.AnyTenant(events.TypeSpotcheckRecorded), api("STREAM.INFO", stream), api("STREAM.MSG.GET", stream),
		api("CONSUMER.CREATE", stream) + ".>", api("CONSUMER.DELETE", stream) + ".>", api("CONSUMER.INFO", stream) + ".>",
		api("CONSUMER.MSG.NEXT", stream) + ".>", "$JS.ACK." + stream + ".>", "$JS.FC." + stream + ".>"}
	con = append(con, bucketInfo(bus.BucketJobs, bus.BucketBatches, bus.BucketCache, bus.BucketViews)...)
	con = append(con, bucketRead(bus.BucketJobs, bus.BucketBatches, bus.BucketViews)...)
	out[ConsoleUser] = Permissions{Publish: con, Subscribe: []string{InboxPrefix(ConsoleUser) + ".>"}}
	return out
}

// servicePermissions are what one service publishes: its events, its dead letters, the
// JetStream API calls of provisioning, its own consumers and acknowledgements, its lease
// and the buckets it uses.
func servicePermissions(svc string, teams []string, stream string) Permissions {
	var pub []string
	for _, t := range bus.ServiceOutputs[svc] {
		pub = append(pub, events.AnyTenant(t))
	}
	pub = append(pub, events.DeadLetterSubject(svc))
	// Provisioning (bus.Provision) creates or updates the stream and the buckets; creating
	// a bucket reads the account's JetStream limits first.
	pub = append(pub, "$JS.API.INFO", api("STREAM.INFO", stream), api("STREAM.CREATE", stream), api("STREAM.UPDATE", stream), api("STREAM.MSG.GET", stream))
	for _, b := range provisioned {
		pub = append(pub, api("STREAM.CREATE", kvStream(b)), api("STREAM.UPDATE", kvStream(b)))
	}
	pub = append(pub, bucketInfo(provisioned...)...)
	// Its own durables, with or without --tenants.
	for _, d := range dedup(append(bus.ConsumerNames(svc, nil), bus.ConsumerNames(svc, teams)...)) {
		c := stream + "." + d
		pub = append(pub, "$JS.API.CONSUMER.CREATE."+c, "$JS.API.CONSUMER.CREATE."+c+".>", "$JS.API.CONSUMER.INFO."+c,
			"$JS.API.CONSUMER.MSG.NEXT."+c, "$JS.ACK."+c+".>")
	}
	// Its lease (bus.Elect) of the backlog metric.
	pub = append(pub, "$KV."+bus.BucketLeases+".pending."+svc)
	pub = append(pub, bucketRead(bus.BucketLeases)...)
	pub = append(pub, bucketRead(serviceReads[svc]...)...)
	for _, b := range serviceWrites[svc] {
		pub = append(pub, "$KV."+b+".>")
		pub = append(pub, bucketRead(b)...)
	}
	return Permissions{Publish: dedup(pub)}
}

func api(op, stream string) string { return "$JS.API." + op + "." + stream }

func kvStream(bucket string) string { return "KV_" + bucket }

// bucketInfo lets a user open buckets (their stream's info) without reading them.
func bucketInfo(buckets ...string) []string {
	var out []string
	for _, b := range buckets {
		out = append(out, api("STREAM.INFO", kvStream(b)))
	}
	return out
}

// bucketRead lets a user get keys and watch them (an ordered consumer on the bucket's
// stream, its flow control replies, its removal).
func bucketRead(buckets ...string) []string {
	var out []string
	for _, b := range buckets {
		s := kvStream(b)
		out = append(out, api("STREAM.INFO", s), api("DIRECT.GET", s)+".>", api("STREAM.MSG.GET", s),
			api("CONSUMER.CREATE", s)+".>", api("CONSUMER.DELETE", s)+".>", "$JS.FC."+s+".>")
	}
	return out
}

func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
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
