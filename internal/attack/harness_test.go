package attack

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// teams are the two tenants of every world: team-a attacks, team-b is the victim.
var teams = []string{"team-a", "team-b"}

// world is a shared tribunal as a deployment runs it: NATS with the generated
// authorization, each service on its own user, the ingress on its own, and the teams
// holding nothing but their tokens.
type world struct {
	t         *testing.T
	ns        *server.Server
	gen       tenants.Result
	passwords map[string]string
	store     blob.Store
	provider  *recorder
	// op is the operator's connection (audits and checks, never an attacker's).
	op    *nats.Conn
	opJS  jetstream.JetStream
	state bus.Buckets
	// ingressJS is the ingress's own connection (the "compromised publisher" attacks
	// publish on it to show what the services do with what slips past the ingress).
	ingressNC  *nats.Conn
	ingressURL string
	tokens     map[string]string // team -> token

	mu         sync.Mutex
	violations []string
}

type worldOptions struct {
	shareJudgeCache bool
	// judgeLatency keeps jobs pending for a while, for attacks on pending jobs.
	judgeLatency time.Duration
	// service and ingress adjust one service's options and the ingress's config before
	// they start (a deployment's flags: an allowlist, quotas, hosts).
	service func(svc string, o *app.Options)
	ingress func(c *ingress.Config)
}

// newWorld starts a world. The services' and the ingress's connections report every
// permission violation; a world whose services ran into one fails its test, since the
// generated rights must be enough for the whole flow.
func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	g, err := tenants.Generate(teams, tenants.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.StartConfig(t, g.Config)
	store, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab", Latency: o.judgeLatency})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ns: ns, gen: g, passwords: map[string]string{}, store: store, provider: &recorder{Provider: p}, tokens: map[string]string{}}
	for _, c := range g.Credentials {
		w.passwords[c.User] = c.Password
	}
	for tok, team := range g.Tokens {
		w.tokens[team] = tok
	}
	w.op = w.connect(tenants.OperatorUser, false)
	w.opJS, _ = jetstream.New(w.op)

	cfg := bus.Config{Tenants: teams, AckWait: 5 * time.Second, MaxDeliver: 4}
	for _, svc := range bus.Services {
		nc := w.connect(tenants.ServiceUser(svc), true)
		opts := app.Options{Services: []string{svc}, Bus: cfg, Concurrency: 8, Store: store, Instance: svc, CloseTimeout: 10 * time.Second,
			ShareJudgeCache: o.shareJudgeCache}
		if svc == bus.Judge {
			opts.Provider = w.provider
		}
		if o.service != nil {
			o.service(svc, &opts)
		}
		r, err := app.Start(context.Background(), nc, opts)
		if err != nil {
			t.Fatalf("start %s as %s: %v", svc, tenants.ServiceUser(svc), err)
		}
		t.Cleanup(r.Close)
		if svc == bus.Aggregator {
			w.state = r.Buckets
		}
	}

	w.ingressNC = w.connect(tenants.IngressUser, true)
	ijs, _ := jetstream.New(w.ingressNC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.OpenBuckets(ctx, ijs)
	if err != nil {
		t.Fatalf("the ingress opens the buckets: %v", err)
	}
	icfg := ingress.Config{Tokens: g.Tokens, Pub: bus.NewPublisher(ijs, bus.ComparePayloads()), Store: store, Buckets: b}
	if o.ingress != nil {
		o.ingress(&icfg)
	}
	srv := httptest.NewServer(ingress.New(icfg))
	t.Cleanup(srv.Close)
	w.ingressURL = srv.URL
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, v := range w.violations {
			t.Errorf("a service or the ingress was refused by its own authorization: %s", v)
		}
	})
	return w
}

// connect opens a connection as user, the way `tribunal serve --nats-user` does; watched
// connections record permission violations.
func (w *world) connect(user string, watched bool) *nats.Conn {
	w.t.Helper()
	opts := []nats.Option{nats.UserInfo(user, w.passwords[user]), nats.CustomInboxPrefix(tenants.InboxPrefix(user)), nats.MaxReconnects(-1)}
	if watched {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			w.mu.Lock()
			w.violations = append(w.violations, user+": "+err.Error())
			w.mu.Unlock()
		}))
	}
	nc, err := nats.Connect(w.ns.ClientURL(), opts...)
	if err != nil {
		w.t.Fatalf("connect %s: %v", user, err)
	}
	w.t.Cleanup(nc.Close)
	return nc
}

// team is a team's side: its token and the ingress, nothing else.
func (w *world) team(name string) *ingress.Client {
	w.t.Helper()
	c, err := ingress.Dial(ctxT(w.t), w.ingressURL, w.tokens[name], nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// textBatch is n ab ACs over small text files; salt makes its content its own.
func textBatch(n int, salt string) map[string]string {
	files := map[string]string{}
	var sb strings.Builder
	sb.WriteString("version: 1\nname: attack\nacs:\n")
	for i := range n {
		files[fmt.Sprintf("ours/%d.md", i)] = fmt.Sprintf("# Notes %d %s\nOur build.\n", i, salt)
		files[fmt.Sprintf("ref/%d.md", i)] = fmt.Sprintf("# Notes %d %s\nThe target.\n", i, salt)
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: the notes are clear\n    ours: ours/%d.md\n    reference: ref/%d.md\n", i+1, i, i)
	}
	files["batch.yaml"] = sb.String()
	return files
}

// submit submits files as c's team through the ingress.
func (w *world) submit(c *ingress.Client, files map[string]string) client.Submission {
	w.t.Helper()
	b := e2e.WriteBatch(w.t, files)
	s := &client.Submitter{Pub: c, Store: c}
	sub, err := s.Submit(ctxT(w.t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		w.t.Fatal(err)
	}
	return sub
}

// wait follows a batch through the ingress to its completion and reads its results.
func (w *world) wait(c *ingress.Client, sub client.Submission) *client.Results {
	w.t.Helper()
	ctx := ctxT(w.t)
	if _, err := client.Poll(ctx, 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		w.t.Fatalf("batch %s/%s did not complete: %v", sub.Tenant, sub.BatchID, err)
	}
	res, err := c.Results(ctx, sub.BatchID)
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// victim is team-b's batch of n ACs, submitted before an attack.
func (w *world) victim(n int) (*ingress.Client, client.Submission) {
	w.t.Helper()
	b := w.team("team-b")
	return b, w.submit(b, textBatch(n, "victim"))
}

// victimIntact checks that team-b's batch completed with every AC compared (the scripted
// judge's winner A, nothing blocked) and that its audit is clean.
func (w *world) victimIntact(c *ingress.Client, sub client.Submission) *client.Results {
	w.t.Helper()
	res := w.wait(c, sub)
	if res.Summary.Total != sub.Jobs || res.Summary.Compared != sub.Jobs || res.Summary.Blocked != 0 || len(res.Rows) != sub.Jobs {
		w.t.Errorf("victim's batch %s: summary %+v, %d rows; want %d compared", sub.BatchID, res.Summary, len(res.Rows), sub.Jobs)
	}
	for _, r := range res.Rows {
		if r.Status != string(events.StatusCompared) || r.RawWinner != "A" {
			w.t.Errorf("victim's %s: %+v", r.ACID, r)
		}
	}
	w.auditClean(sub.Tenant, sub.BatchID)
	return res
}

// auditClean replays the batch's events as `tribunal audit` does (on the operator's
// connection) and checks the aggregator's state against them. The aggregator records a
// completion before it publishes the events announcing it, so a replay right after the
// batch reads as complete may miss those: the audit is repeated until it is clean or
// 20 seconds have passed.
func (w *world) auditClean(tenant, batchID string) {
	w.t.Helper()
	ctx := ctxT(w.t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep, err := audit.Run(ctx, w.opJS, audit.Filter{Tenant: tenant, BatchID: batchID}, w.store)
		if err != nil {
			w.t.Fatal(err)
		}
		if err := audit.CheckBatchState(ctx, &rep, records.New(w.state), tenant, batchID); err != nil {
			w.t.Fatal(err)
		}
		if rep.OK() {
			return
		}
		if time.Now().After(deadline) {
			w.t.Errorf("audit of %s/%s: %+v", tenant, batchID, rep.Mismatches)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recorder is the scripted judge, counting its calls and keeping the user text of each.
type recorder struct {
	judge.Provider
	mu    sync.Mutex
	texts []string
}

func (r *recorder) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == "user" {
			for _, p := range m.Parts {
				b.WriteString(p.Text)
			}
		}
	}
	r.mu.Lock()
	r.texts = append(r.texts, b.String())
	r.mu.Unlock()
	return r.Provider.Complete(ctx, req)
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.texts)
}

func (r *recorder) prompts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.texts...)
}
