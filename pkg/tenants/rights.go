package tenants

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
)

// Placeholders a Grant's subjects may hold; Generate expands them.
const (
	// TeamPlaceholder stands for each team: a subject holding it is granted once per team
	// (a service's per-tenant durable, tribunal-judge-<team>).
	TeamPlaceholder = "<team>"
	// ReaderPlaceholder stands for each stream reader's consumer (bus.ReaderNames).
	ReaderPlaceholder = "<reader>"
	// UserPlaceholder stands for the user the grant is expanded for (its own inbox).
	UserPlaceholder = "<user>"
)

// A Grant is one row of the authorization: subjects some users may publish to (or
// subscribe to), and why they may. Grants are the one source of every generated user's
// rights: Generate expands them into the config, and the users table of docs/security.md
// is rendered from them (RightsTable), and checked against Generate by a test.
type Grant struct {
	// Users hold the grant.
	Users []string
	// Subscribe grants subscribing to Subjects; otherwise publishing to them.
	Subscribe bool
	// Subjects may hold placeholders (TeamPlaceholder, ReaderPlaceholder,
	// UserPlaceholder).
	Subjects []string
	// Why says what the users need the subjects for.
	Why string
}

// Grants are every generated user's rights on a deployment whose stream is stream.
//
// Every right is there because a code path of its user takes it, and each is as narrow
// as NATS subjects allow: no user but the operator holds a wildcard over another user's
// consumers, state or events. The services user (`tribunal serve all`) holds each
// service's grants.
func Grants(stream string) []Grant {
	var g []Grant
	add := func(users []string, why string, subjects ...string) {
		g = append(g, Grant{Users: users, Subjects: subjects, Why: why})
	}
	services := func(svcs ...string) []string {
		var out []string
		for _, svc := range svcs {
			out = append(out, ServiceUser(svc))
		}
		return append(out, ServicesUser)
	}
	all := services(bus.Services...)
	js := func(op, name string) string { return "$JS.API." + op + "." + name }

	for _, svc := range bus.Services {
		var out []string
		for _, t := range bus.ServiceOutputs[svc] {
			out = append(out, events.AnyTenant(t))
		}
		out = append(out, events.DeadLetterSubject(svc))
		add(services(svc), "its output events (bus.ServiceOutputs) on any tenant's subject, its dead letters", out...)
	}
	add(all, "provisioning (bus.Provision): create or update the stream", js("STREAM.CREATE", stream), js("STREAM.UPDATE", stream))
	var buckets []string
	buckets = append(buckets, "$JS.API.INFO")
	for _, b := range provisioned {
		buckets = append(buckets, js("STREAM.CREATE", kvStream(b)), js("STREAM.UPDATE", kvStream(b)))
	}
	for _, b := range opened {
		buckets = append(buckets, js("STREAM.INFO", kvStream(b)))
	}
	buckets = append(buckets, js("STREAM.INFO", kvStream(bus.BucketLeases)))
	add(all, "provisioning: create or update the buckets (after reading the account's limits), open them and the lease bucket", buckets...)
	for _, svc := range bus.Services {
		var subjects []string
		for _, d := range durables(svc) {
			c := stream + "." + d
			subjects = append(subjects, "$JS.API.CONSUMER.CREATE."+c, "$JS.API.CONSUMER.INFO."+c, "$JS.API.CONSUMER.MSG.NEXT."+c, "$JS.ACK."+c+".>")
		}
		add(services(svc), "its own durables, with or without --tenants: create or update (provisioning), bind, pull, acknowledge", subjects...)
	}
	for _, svc := range bus.Services {
		key := "$KV." + bus.BucketLeases + ".pending." + svc
		add(services(svc), "its backlog lease (bus.Elect): take, renew, release, and read its own key only", key, js("DIRECT.GET", kvStream(bus.BucketLeases))+"."+key)
	}
	add(services(bus.Renderer, bus.Judge), "the processes that call a model: the shared rate limits (pkg/ratelimit), created at start",
		js("STREAM.CREATE", kvStream(ratelimit.DefaultBucket)), js("STREAM.UPDATE", kvStream(ratelimit.DefaultBucket)),
		js("STREAM.INFO", kvStream(ratelimit.DefaultBucket)), kvWrite(ratelimit.DefaultBucket), kvGet(ratelimit.DefaultBucket))
	add(services(bus.Renderer, bus.Judge), "the processes that call a model: the batches' and teams' budgets (pkg/budget), created when a budget first applies",
		js("STREAM.CREATE", kvStream(budget.DefaultBucket)), js("STREAM.UPDATE", kvStream(budget.DefaultBucket)),
		js("STREAM.INFO", kvStream(budget.DefaultBucket)), kvWrite(budget.DefaultBucket), kvGet(budget.DefaultBucket))
	add(services(bus.Judge), "the batch judge mode's provider batches (pkg/judge/batchmode), created at start: read and write",
		js("STREAM.CREATE", kvStream(batchmode.Bucket)), js("STREAM.UPDATE", kvStream(batchmode.Bucket)),
		js("STREAM.INFO", kvStream(batchmode.Bucket)), kvWrite(batchmode.Bucket), kvGet(batchmode.Bucket))
	add(services(bus.Renderer, bus.Judge), "the judge cache (and the renderer's teacher transcripts): read and write", kvWrite(bus.BucketCache), kvGet(bus.BucketCache))
	add(services(bus.Gater), "rubric views, read to gate a view", kvGet(bus.BucketViews))
	add(services(bus.Aggregator), "the aggregator's state: job records, batch headers, views, judge flip history (in the cache bucket)",
		kvWrite(bus.BucketJobs), kvGet(bus.BucketJobs), kvWrite(bus.BucketBatches), kvGet(bus.BucketBatches),
		kvWrite(bus.BucketViews), kvGet(bus.BucketViews), kvWrite(bus.BucketCache), kvGet(bus.BucketCache))
	add(services(bus.Aggregator), "walk a batch's job records (records.EachJob): a pull consumer of its own on the jobs bucket's stream", kvScan(bus.BucketJobs)...)
	var readers []string
	for _, svc := range bus.Services {
		if bus.ReadsStream(svc) {
			readers = append(readers, svc)
		}
	}
	add(services(readers...), "read a stored event back when a publish is acknowledged Duplicate (bus.Publisher); the other services take their own duplicates on trust (bus.TrustDuplicatesOf) and read no stream message",
		js("STREAM.INFO", stream), js("STREAM.MSG.GET", stream))

	// The ingress.
	ing := []string{IngressUser}
	var team []string
	for _, t := range ingress.TeamTypes() {
		team = append(team, events.AnyTenant(t))
	}
	add(ing, "the events a team originates (ingress.TeamTypes), on any tenant's subject: the ingress checks the tenant", team...)
	add(ing, "read a stored event back when a publish is acknowledged Duplicate (a team's resubmission)", js("STREAM.INFO", stream), js("STREAM.MSG.GET", stream))
	add(ing, "open the buckets (bus.OpenBuckets)", openBuckets()...)
	add(ing, "the quotas' reservations (ingress.QuotaBucket), shared by the ingress replicas: create the bucket at first use (nats.go reads the account's JetStream info first), read and write its keys",
		"$JS.API.INFO", js("STREAM.CREATE", kvStream(ingress.QuotaBucket)), js("STREAM.UPDATE", kvStream(ingress.QuotaBucket)),
		js("STREAM.INFO", kvStream(ingress.QuotaBucket)), kvWrite(ingress.QuotaBucket), kvGet(ingress.QuotaBucket))
	add(ing, "batch progress, results and quotas: read job records and batch headers, walking a batch's jobs with a pull consumer of its own (records.EachJob) and a tenant's batches with a watch",
		union([]string{kvGet(bus.BucketJobs), kvGet(bus.BucketBatches)}, kvScan(bus.BucketJobs), kvWatch(bus.BucketBatches))...)

	// The console.
	con := []string{ConsoleUser}
	add(con, "HE-2 spot-checks, rubric loop resets and people's reviews (client.Spotcheck, client.ResetView, client.RecordReview)",
		events.AnyTenant(events.TypeSpotcheckRecorded), events.AnyTenant(events.TypeViewReset), events.AnyTenant(events.TypeReviewRecorded))
	add(con, "read a stored event back when a publish is acknowledged Duplicate; stream state for an audit's plan", js("STREAM.INFO", stream), js("STREAM.MSG.GET", stream))
	c := stream + "." + ReaderPlaceholder
	add(con, "audits and trust reports read the stream through the stream readers (bus.ReadStream): create, check, pull from and delete a reader's consumer, no other consumer",
		"$JS.API.CONSUMER.CREATE."+c, "$JS.API.CONSUMER.INFO."+c, "$JS.API.CONSUMER.MSG.NEXT."+c, "$JS.API.CONSUMER.DELETE."+c)
	add(con, "open the buckets (console.WaitForBuckets)", openBuckets()...)
	add(con, "batch pages and audits: read and watch job records and batch headers, walk a batch's jobs with a pull consumer of its own (records.EachJob), read views",
		union([]string{kvGet(bus.BucketJobs), kvGet(bus.BucketBatches), kvGet(bus.BucketViews)}, kvWatch(bus.BucketJobs), kvScan(bus.BucketJobs), kvWatch(bus.BucketBatches))...)

	// Every generated user reads only its own replies.
	var inboxed []string
	for _, u := range users() {
		if u != OperatorUser {
			inboxed = append(inboxed, u)
		}
	}
	g = append(g, Grant{Users: inboxed, Subscribe: true, Subjects: []string{InboxPrefix(UserPlaceholder) + ".>"},
		Why: "its own reply inbox (InboxPrefix), so no user reads the replies to another's requests"})
	g = append(g, Grant{Users: []string{OperatorUser}, Subjects: []string{">"}, Why: "anything: direct submission, audit, redrive, rejudge"},
		Grant{Users: []string{OperatorUser}, Subscribe: true, Subjects: []string{">"}, Why: "anything"})
	return g
}

// durables are a service's durable consumer names, with or without --tenants, the
// per-tenant ones holding TeamPlaceholder.
func durables(svc string) []string {
	out := bus.ConsumerNames(svc, nil)
	for _, d := range bus.ConsumerNames(svc, []string{TeamPlaceholder}) {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// provisioned are the buckets every service process creates or updates at start
// (bus.Provision; the lease bucket is created by bus.Elect, only when it does not exist,
// and the rate-limit bucket by the processes that call a model); opened are the buckets
// bus.OpenBuckets binds.
var (
	provisioned = []string{bus.BucketJobs, bus.BucketBatches, bus.BucketCache, bus.BucketViews, bus.BucketLeases}
	opened      = []string{bus.BucketJobs, bus.BucketBatches, bus.BucketCache, bus.BucketViews}
)

func kvStream(bucket string) string { return "KV_" + bucket }

// openBuckets lets a user bind the buckets (their streams' info) without reading them.
func openBuckets() []string {
	var out []string
	for _, b := range opened {
		out = append(out, "$JS.API.STREAM.INFO."+kvStream(b))
	}
	return out
}

// kvGet reads a bucket's keys: buckets allow direct gets (nats.go creates them so), so a
// get is a direct get of the key's last message, never a stream message read.
func kvGet(bucket string) string {
	return "$JS.API.DIRECT.GET." + kvStream(bucket) + ".$KV." + bucket + ".>"
}

// kvWrite writes a bucket's keys (put, create, update, delete).
func kvWrite(bucket string) string { return "$KV." + bucket + ".>" }

// kvWatch watches a bucket's keys (jetstream.KeyValue.Watch, ListKeys): an ordered push
// consumer of the client's naming on the bucket's stream, its flow control replies, its
// removal when the watch stops.
func kvWatch(bucket string) []string {
	s := kvStream(bucket)
	return []string{"$JS.API.CONSUMER.CREATE." + s + ".>", "$JS.API.CONSUMER.DELETE." + s + ".>", "$JS.FC." + s + ".>"}
}

// kvScan walks a bucket's keys through a pull consumer of the reader's own on the
// bucket's stream (records.EachJob): create it, pull from it, delete it. No service
// durable lives on a bucket's stream, so the wildcard for the consumer's name reaches
// only other readers' short-lived consumers.
func kvScan(bucket string) []string {
	s := kvStream(bucket)
	return []string{"$JS.API.CONSUMER.CREATE." + s + ".>", "$JS.API.CONSUMER.MSG.NEXT." + s + ".>", "$JS.API.CONSUMER.DELETE." + s + ".>"}
}

// union is the subjects of lists in order, each once.
func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			out = appendNew(out, s)
		}
	}
	return out
}

// expand is the user's rights by Grants, placeholders expanded for teams.
func expand(grants []Grant, teams []string) map[string]Permissions {
	out := map[string]Permissions{}
	for _, g := range grants {
		for _, u := range g.Users {
			p := out[u]
			for _, s := range g.Subjects {
				for _, e := range expandSubject(s, u, teams) {
					if g.Subscribe {
						p.Subscribe = appendNew(p.Subscribe, e)
					} else {
						p.Publish = appendNew(p.Publish, e)
					}
				}
			}
			out[u] = p
		}
	}
	return out
}

func expandSubject(s, user string, teams []string) []string {
	s = strings.ReplaceAll(s, UserPlaceholder, user)
	var out []string
	switch {
	case strings.Contains(s, TeamPlaceholder):
		for _, t := range teams {
			out = append(out, strings.ReplaceAll(s, TeamPlaceholder, t))
		}
	case strings.Contains(s, ReaderPlaceholder):
		for _, r := range bus.ReaderNames() {
			out = append(out, strings.ReplaceAll(s, ReaderPlaceholder, r))
		}
	default:
		out = []string{s}
	}
	return out
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Markers enclose the users table in docs/security.md: the lines between them are
// RightsTable's output.
const (
	RightsBegin = "<!-- BEGIN RIGHTS: generated from tenants.Grants; `go test ./pkg/tenants -run TestSecurityDoc -update` rewrites it -->"
	RightsEnd   = "<!-- END RIGHTS -->"
)

// RightsTable renders grants as the Markdown table of docs/security.md: one row per
// grant, its users, whether it publishes or subscribes, its subjects and why. ParseRights
// reads it back.
func RightsTable(grants []Grant) string {
	var b strings.Builder
	b.WriteString("| users | may | subjects | why |\n|---|---|---|---|\n")
	for _, g := range grants {
		may := "publish"
		if g.Subscribe {
			may = "subscribe"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", codeList(g.Users), may, codeList(g.Subjects), g.Why)
	}
	return b.String()
}

func codeList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, " ")
}

// ParseRights reads a table RightsTable wrote back into grants (a hand-edited table too,
// so a test can hold the document to Generate).
func ParseRights(table string) ([]Grant, error) {
	var out []Grant
	for n, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if n < 2 {
			continue // the header and its rule
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) != 4 {
			return nil, fmt.Errorf("rights table line %d: %d cells, want 4: %s", n+1, len(cells), line)
		}
		users, err := parseCodeList(cells[0])
		if err != nil {
			return nil, fmt.Errorf("rights table line %d: users: %w", n+1, err)
		}
		subjects, err := parseCodeList(cells[2])
		if err != nil {
			return nil, fmt.Errorf("rights table line %d: subjects: %w", n+1, err)
		}
		g := Grant{Users: users, Subjects: subjects, Why: strings.TrimSpace(cells[3])}
		switch strings.TrimSpace(cells[1]) {
		case "publish":
		case "subscribe":
			g.Subscribe = true
		default:
			return nil, fmt.Errorf("rights table line %d: %q is neither publish nor subscribe", n+1, cells[1])
		}
		out = append(out, g)
	}
	return out, nil
}

func parseCodeList(cell string) ([]string, error) {
	var out []string
	for _, f := range strings.Fields(cell) {
		if len(f) < 3 || !strings.HasPrefix(f, "`") || !strings.HasSuffix(f, "`") {
			return nil, fmt.Errorf("%q is not a `code` item", f)
		}
		out = append(out, strings.Trim(f, "`"))
	}
	return out, nil
}
