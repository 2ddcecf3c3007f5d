package tenants_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// TestGenerate: no team has a NATS user; every team has one token; the ingress may
// publish only the events a team originates; re-running keeps passwords and tokens.
func TestGenerate(t *testing.T) {
	g, err := tenants.Generate([]string{"team-b", "team-a"}, tenants.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, c := range g.Credentials {
		users = append(users, c.User)
		if strings.Contains(g.Config, c.Password) {
			t.Errorf("the config holds %s's password in clear", c.User)
		}
	}
	want := []string{tenants.OperatorUser, tenants.ServicesUser, "tribunal-renderer", "tribunal-gater", "tribunal-judge", "tribunal-aggregator", tenants.IngressUser, tenants.ConsoleUser}
	if !slices.Equal(users, want) {
		t.Fatalf("users %v, want %v (and no team user)", users, want)
	}
	for _, team := range []string{"team-a", "team-b"} {
		if strings.Contains(g.Config, `user: "`+team+`"`) {
			t.Errorf("%s has a NATS user", team)
		}
	}
	if err := tokens.Check(g.Tokens); err != nil {
		t.Fatal(err)
	}
	byTeam := map[string]string{}
	for tok, team := range g.Tokens {
		byTeam[team] = tok
	}
	if len(g.Tokens) != 2 || byTeam["team-a"] == "" || byTeam["team-b"] == "" {
		t.Fatalf("tokens %v: want one per team", g.Tokens)
	}
	// The ingress publishes exactly the events a team originates (ingress.TeamTypes), on
	// any tenant's subject, and nothing else of the stream or the buckets but its own
	// quota reservations.
	var teamSubjects []string
	for _, ty := range ingress.TeamTypes() {
		teamSubjects = append(teamSubjects, events.AnyTenant(ty))
	}
	pub := g.Permissions[tenants.IngressUser].Publish
	for _, s := range []string{"tribunal.*.job.submitted", "tribunal.*.spotcheck.recorded", "tribunal.*.batch.opened"} {
		if !slices.Contains(pub, s) {
			t.Errorf("the ingress may not publish %s: %v", s, pub)
		}
	}
	for _, s := range pub {
		if strings.HasPrefix(s, "tribunal.") && !slices.Contains(teamSubjects, s) || strings.HasPrefix(s, "$KV.") && s != "$KV."+ingress.QuotaBucket+".>" || s == ">" {
			t.Errorf("the ingress may publish %s", s)
		}
	}
	if slices.Contains(pub, events.AnyTenant(events.TypeJobCancelRequested)) || slices.Contains(pub, events.AnyTenant(events.TypeRenderRequested)) {
		t.Error("the ingress may publish a service's event")
	}
	for user, p := range g.Permissions {
		if user == tenants.OperatorUser {
			continue
		}
		if len(p.Subscribe) != 1 || p.Subscribe[0] != tenants.InboxPrefix(user)+".>" {
			t.Errorf("%s subscribes %v, want its own inbox only", user, p.Subscribe)
		}
	}

	// Re-running: passwords and listed teams' tokens kept; a team left out loses its
	// token; an operator's console token stays.
	pw := map[string]string{}
	for _, c := range g.Credentials {
		pw[c.User] = c.Password
	}
	existing := map[string]string{"operator-console-token-0123": tokens.AllTenants}
	for tok, team := range g.Tokens {
		existing[tok] = team
	}
	again, err := tenants.Generate([]string{"team-a", "team-c"}, tenants.Options{Passwords: pw, Tokens: existing})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again.Credentials {
		if c.Password != pw[c.User] {
			t.Errorf("%s's password changed", c.User)
		}
	}
	if again.Tokens[byTeam["team-a"]] != "team-a" || again.Tokens[byTeam["team-b"]] != "" || again.Tokens["operator-console-token-0123"] != tokens.AllTenants || len(again.Tokens) != 3 {
		t.Errorf("tokens after re-running for team-a and team-c: %v", again.Tokens)
	}
}

// TestGenerateReviewers: each --reviewer entry issues one more reviewer's token of its
// team ("<team>:reviewer"); re-running keeps a listed team's reviewers and drops those
// of a team left out; a reviewer of a team not listed is refused.
func TestGenerateReviewers(t *testing.T) {
	g, err := tenants.Generate([]string{"team-a", "team-b"}, tenants.Options{Reviewers: []string{"team-a", "team-a", "team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.NewReviewers) != 3 || len(g.Tokens) != 5 {
		t.Fatalf("new reviewers %d, tokens %v", len(g.NewReviewers), g.Tokens)
	}
	for i, team := range []string{"team-a", "team-a", "team-b"} {
		if v := g.Tokens[g.NewReviewers[i]]; v != tokens.ReviewerOf(team) {
			t.Errorf("reviewer %d: %q, want %q", i, v, tokens.ReviewerOf(team))
		}
	}
	again, err := tenants.Generate([]string{"team-a"}, tenants.Options{Tokens: g.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	if again.Tokens[g.NewReviewers[0]] == "" || again.Tokens[g.NewReviewers[1]] == "" || again.Tokens[g.NewReviewers[2]] != "" || len(again.Tokens) != 3 {
		t.Errorf("after re-running for team-a alone: %v", again.Tokens)
	}
	if _, err := tenants.Generate([]string{"team-a"}, tenants.Options{Reviewers: []string{"team-c"}}); err == nil {
		t.Error("a reviewer of a team not listed was issued")
	}
}

func TestGenerateRejectsBadTeams(t *testing.T) {
	for _, teams := range [][]string{{"a.b"}, {"x", "x"}, {"*"}, {"Team"}} {
		if _, err := tenants.Generate(teams, tenants.Options{}); err == nil {
			t.Errorf("%v accepted", teams)
		}
	}
}

// TestLeastPrivilege starts a real nats-server with the generated authorization and
// checks that each user is held to its own part: a service cannot publish another
// service's events or write state it does not own, the ingress cannot publish a
// service's event, write state or consume the stream. (The whole flow running under these
// users, and every attack on them, is internal/attack's.)
func TestLeastPrivilege(t *testing.T) {
	g, err := tenants.Generate([]string{"team-a", "team-b"}, tenants.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.StartConfig(t, g.Config)
	pw := map[string]string{}
	for _, c := range g.Credentials {
		pw[c.User] = c.Password
	}
	type conn struct {
		nc   *nats.Conn
		js   jetstream.JetStream
		errs chan error
	}
	connect := func(user string) conn {
		errs := make(chan error, 64)
		nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, pw[user]), nats.CustomInboxPrefix(tenants.InboxPrefix(user)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatalf("connect %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return conn{nc, js, errs}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each service provisions what it needs, under its own user.
	for _, svc := range bus.Services {
		c := connect(tenants.ServiceUser(svc))
		if err := bus.Provision(ctx, c.js, bus.Config{Tenants: []string{"team-a", "team-b"}, Services: []string{svc}}); err != nil {
			t.Fatalf("%s cannot provision its part: %v", svc, err)
		}
	}
	op := connect(tenants.OperatorUser)
	st, err := op.js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	stored := func(subject string) bool {
		_, err := st.GetLastMsgForSubject(ctx, subject)
		return !errors.Is(err, jetstream.ErrMsgNotFound)
	}
	subj := func(tenant string, typ events.Type) string { s, _ := events.Subject(tenant, typ); return s }

	allowed := []struct {
		user, subject string
	}{
		{"tribunal-judge", subj("team-a", events.TypeVerdictEmitted)},
		{"tribunal-gater", subj("team-a", events.TypeGatesFailed)},
		{"tribunal-aggregator", subj("team-a", events.TypeBatchCompleted)},
		{tenants.IngressUser, subj("team-a", events.TypeJobSubmitted)},
	}
	for _, a := range allowed {
		c := connect(a.user)
		if _, err := c.js.Publish(ctx, a.subject, []byte("x")); err != nil {
			t.Errorf("%s publishing %s: %v", a.user, a.subject, err)
		}
	}
	// The aggregator (a batch's completion), the ingress (results) and the console (batch
	// pages, audits) walk a batch's job records on their own users.
	agg := connect(tenants.ServiceUser(bus.Aggregator))
	aggBuckets, err := bus.OpenBuckets(ctx, agg.js)
	if err != nil {
		t.Fatal(err)
	}
	const walked = 3
	for i := range walked {
		j := &records.Job{Tenant: "team-a", Batch: "walk", ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: walked}
		if _, err := records.New(aggBuckets).CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	for _, user := range []string{tenants.ServiceUser(bus.Aggregator), tenants.IngressUser, tenants.ConsoleUser} {
		c := connect(user)
		b, err := bus.OpenBuckets(ctx, c.js)
		if err != nil {
			t.Fatalf("%s opening the buckets: %v", user, err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		jobs, err := records.New(b).LoadJobs(rctx, "team-a", "walk")
		rcancel()
		if err != nil || len(jobs) != walked {
			t.Errorf("%s walking a batch's jobs: %d of %d (%v)", user, len(jobs), walked, err)
		}
		c.nc.Flush()
		select {
		case err := <-c.errs:
			t.Errorf("%s walking a batch's jobs: %v", user, err)
		default:
		}
	}
	refused := []struct {
		user, subject string
	}{
		{"tribunal-renderer", subj("team-b", events.TypeVerdictEmitted)},
		{"tribunal-judge", subj("team-b", events.TypeBatchCompleted)},
		{"tribunal-gater", subj("team-b", events.TypeJobSubmitted)},
		{"tribunal-renderer", "$KV." + bus.BucketJobs + ".team-b.batch-1.AC-1"},
		{"tribunal-judge", "$KV." + bus.BucketBatches + ".team-b.batch-1"},
		{"tribunal-gater", "$KV." + bus.BucketViews + ".team-b.f.t.s.a"},
		{"tribunal-renderer", events.DeadLetterSubject(bus.Aggregator)},
		{tenants.IngressUser, subj("team-b", events.TypeVerdictEmitted)},
		{tenants.IngressUser, subj("team-b", events.TypeRenderRequested)},
		{tenants.IngressUser, "$KV." + bus.BucketJobs + ".team-b.batch-1.AC-1"},
		{tenants.IngressUser, events.DeadLetterSubject(bus.Judge)},
	}
	for _, r := range refused {
		c := connect(r.user)
		if err := c.nc.Publish(r.subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		c.nc.Flush()
		select {
		case err := <-c.errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("%s publishing %s: %v, want a permissions violation", r.user, r.subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s publishing %s: no permissions violation", r.user, r.subject)
		}
		if strings.HasPrefix(r.subject, "tribunal.") && stored(r.subject) {
			t.Errorf("the stream stored %s's publish on %s", r.user, r.subject)
		}
	}
	// The ingress cannot consume the stream: no consumer of its own on it, no subscription.
	ing := connect(tenants.IngressUser)
	octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
	defer ocancel()
	if _, err := ing.js.OrderedConsumer(octx, "TRIBUNAL", jetstream.OrderedConsumerConfig{}); err == nil {
		t.Error("the ingress created a consumer on the stream")
	}
	if _, err := ing.nc.SubscribeSync("tribunal.>"); err != nil {
		t.Fatal(err)
	}
	ing.nc.Flush()
	select {
	case err := <-ing.errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("the ingress subscribing tribunal.>: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the ingress subscribed tribunal.>")
	}
}

// TestNoUserReachesAnothersConsumers: beside the operator, no user holds a consumer or
// acknowledgement right on the stream with a wildcard for the consumer's name, nor the
// create subject without a name (whose body names the consumer), so none can pull, ack,
// delete or rewrite a durable that is not its own; and only the aggregator (with the
// services user), the ingress and the console read stream messages, never the judge.
func TestNoUserReachesAnothersConsumers(t *testing.T) {
	g, err := tenants.Generate([]string{"team-a", "team-b"}, tenants.Options{})
	if err != nil {
		t.Fatal(err)
	}
	readers := []string{tenants.ServiceUser(bus.Aggregator), tenants.ServicesUser, tenants.IngressUser, tenants.ConsoleUser}
	for user, p := range g.Permissions {
		if user == tenants.OperatorUser {
			continue
		}
		for _, s := range p.Publish {
			tok := strings.Split(s, ".")
			name := ""
			switch {
			case strings.HasPrefix(s, "$JS.API.CONSUMER.MSG.NEXT.TRIBUNAL"):
				name = strings.Join(tok[6:], ".")
			case strings.HasPrefix(s, "$JS.API.CONSUMER.") && len(tok) > 4 && tok[4] == "TRIBUNAL", strings.HasPrefix(s, "$JS.API.CONSUMER.DURABLE."):
				name = strings.Join(tok[5:], ".")
			case strings.HasPrefix(s, "$JS.ACK.TRIBUNAL"):
				name = strings.Join(tok[3:min(4, len(tok))], ".")
			default:
				if (s == "$JS.API.STREAM.MSG.GET.TRIBUNAL" || strings.HasPrefix(s, "$JS.API.DIRECT.GET.TRIBUNAL")) && !slices.Contains(readers, user) {
					t.Errorf("%s may read stream messages: %s", user, s)
				}
				continue
			}
			if name == "" || strings.ContainsAny(name, "*>") {
				t.Errorf("%s may address any consumer of the stream: %s", user, s)
			}
		}
	}
	for _, s := range g.Permissions["tribunal-judge"].Publish {
		if strings.Contains(s, "MSG.GET.TRIBUNAL") || strings.Contains(s, "DIRECT.GET.TRIBUNAL") || strings.Contains(s, "STREAM.INFO.TRIBUNAL") || strings.Contains(s, "GET.KV_"+bus.BucketJobs) {
			t.Errorf("the judge may read %s", s)
		}
	}
}
