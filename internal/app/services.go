// Package app wires tribunal's services onto a NATS connection: provisioning, one
// Watermill router per service, health and metrics endpoints. The CLI's serve, run and
// bench modes all start services through it, so the all-in-one mode runs exactly the code
// the distributed mode runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/judge/instrument"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/services/aggregator"
	"github.com/tribunal-dev/tribunal/services/gater"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

// Options configure the services of one process.
type Options struct {
	// Services to run; nil means all four, an empty slice none (a client).
	Services []string
	Bus      bus.Config
	// Concurrency bounds in-flight messages per service in this process.
	Concurrency int
	// TenantQuota caps one tenant's messages in flight per service in this process when
	// Bus.Tenants is set (default half of Concurrency).
	TenantQuota int
	Store       blob.Store
	// Provider is required when the judge runs; the renderer uses it to run equivalence
	// documents (without one, equivalence jobs are blocked).
	Provider judge.Provider
	Params   judge.Params
	// Instance names this process in verdicts and logs.
	Instance string
	Fetch    artifact.FetchOptions
	// Sensors are the renderer's rubric sensors (web and command adapters).
	Sensors *renderer.Sensors
	// Gates are the gater's operator gates commands by adapter name.
	Gates *command.Gates
	// ShareJudgeCache serves judge-cache answers across tenants (stage.JudgeEnv.ShareCache):
	// an operator's opt-in with a privacy cost, see docs/security.md.
	ShareJudgeCache bool
	// Spend, when set, is what each tenant may spend on the provider (pkg/spend): the
	// renderer blocks and the judge refuses a job naming a model the tenant may not name
	// or making more calls per AC than the cap, before asking the provider. Nil checks
	// nothing: the all-in-one run and tests, where the submitter is the one user. A
	// policy naming no Default takes the provider's default model.
	Spend *spend.Policy
	// External, when set, is the external judge's exchange: the judge service answers
	// the jobs that name the external judge from it, and parks the ones nobody answered
	// yet (services/judge.WithExternal; ResumeExternal goes on with them). Without it
	// such jobs are refused.
	External *external.Exchange
	// RateLimits, when set, holds every provider call (judge verdicts and equivalence
	// runner calls in the renderer) to requests and tokens per minute shared by every
	// instance on the bus (pkg/ratelimit).
	RateLimits *ratelimit.Limits
	// Prices turn every provider call's usage into its cost (pkg/price); nil is the
	// shipped default table.
	Prices *price.Table
	// TenantBudgets are the teams' budgets per period (pkg/budget), shared with every
	// instance through the bus like the rate limits; a batch's own `budget:` needs none.
	TenantBudgets map[string]budget.TenantBudget
	// BudgetReplicas is the budgets bucket's replication factor (0: 1).
	BudgetReplicas int
	// ShutdownGrace is how long handlers in flight may go on after Close before they
	// are cancelled and their messages handed back (bus.SubscriberConfig.ShutdownGrace;
	// 0: bus.DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// CloseTimeout bounds how long shutdown waits for in-flight handlers; it is raised
	// to ShutdownGrace plus the time to hand back what was cancelled.
	CloseTimeout time.Duration
	// Published, when set, are ids the stream held when this process started (its tail,
	// bus.ReadPublished; or none, bus.NewPublished), the initial content of the index of
	// stored ids the services' publisher keeps for Published.Window (bus.AlreadyPublished):
	// the all-in-one mode's, whose stream has this one publisher and a server-side
	// duplicate window shorter than both the redelivery horizon and the time it can stay
	// stopped.
	Published *bus.Published
	// JudgeModes, when set, is the judge's modes: whether its calls go to the provider
	// one by one (direct) or gathered into its batch API (pkg/judge/batchmode), by
	// default and when a batch asks. Nil judges every job directly.
	JudgeModes *JudgeModes
	Logger     *slog.Logger

	// batch is the judge's batch-mode provider, built by Start.
	batch judge.Provider
}

// JudgeModes are the judge's modes (Options.JudgeModes).
type JudgeModes struct {
	Policy batchmode.Policy
	Batch  batchmode.Config
	// Waiting bounds the judge messages this process holds while their calls wait in
	// provider batches (DefaultBatchWaiting if 0): each is a message unacknowledged (kept
	// with InProgress), so it also bounds a provider batch's size from one instance, and
	// all instances together stay under the consumer's MaxAckPending.
	Waiting int
}

// DefaultBatchWaiting is JudgeModes.Waiting's default: half the consumer's default
// MaxAckPending, so two judge instances can each fill theirs.
const DefaultBatchWaiting = 2048

// Running is a set of started services.
type Running struct {
	JS       jetstream.JetStream
	Buckets  bus.Buckets
	Pub      *bus.Publisher
	routers  map[string]*message.Router
	subs     []*bus.Subscriber
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	nc       *nats.Conn
	services []string
	// unwatch removes the services' consumer backlogs from the metrics; leases are the
	// elections of the instance that exports them.
	unwatch []func()
	leases  []*bus.Lease
	// opts and provider build the judge service again to resume parked jobs.
	opts     Options
	provider judge.Provider
	// closeBatch stops the batch mode's pollers, after the routers.
	closeBatch func()
}

// Start provisions the bus and runs the requested services until Close.
func Start(ctx context.Context, nc *nats.Conn, o Options) (*Running, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	// Each process creates the durables of the services it runs and no other's: a
	// service's NATS user has rights on its own consumers only (pkg/tenants).
	pcfg := o.Bus
	pcfg.Services = o.Services
	if err := bus.Provision(pctx, js, pcfg); err != nil {
		return nil, err
	}
	buckets, err := bus.OpenBuckets(pctx, js)
	if err != nil {
		return nil, err
	}
	cfg := o.Bus
	if cfg.Stream == "" {
		cfg.Stream = "TRIBUNAL"
	}
	// The services whose NATS user reads no stream message (the judge above all, which
	// must stay blind) take a Duplicate on their own subjects on trust instead of reading
	// the stored message back (bus.TrustDuplicatesOf).
	var blind []string
	for _, svc := range o.Services {
		if !bus.ReadsStream(svc) {
			blind = append(blind, svc)
		}
	}
	pubOpts := []bus.PublisherOption{bus.TrustDuplicatesOf(blind...)}
	if o.Published != nil {
		pubOpts = append(pubOpts, bus.AlreadyPublished(o.Published))
	}
	r := &Running{JS: js, Buckets: buckets, Pub: bus.NewPublisher(js, pubOpts...), routers: map[string]*message.Router{}, nc: nc, services: o.Services}
	provider, err := o.provider(pctx, js)
	if err != nil {
		return nil, err
	}
	if o.batch, r.closeBatch, err = o.batchProvider(pctx, js); err != nil {
		return nil, err
	}
	r.opts, r.provider = o, provider
	// Tenant labels are bounded by the tenants this deployment serves.
	telemetry.Default().SetTenants(cfg.Tenants)
	primeMetrics(o.Services, provider)
	grace := o.ShutdownGrace
	if grace == 0 {
		grace = bus.DefaultShutdownGrace
	}
	closeTimeout := max(o.CloseTimeout, grace+5*time.Second)
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, svc := range o.Services {
		h, deadLetters := o.handler(svc, buckets, provider)
		concurrency := o.Concurrency
		if svc == bus.Judge {
			concurrency = judgeConcurrency(o.Concurrency, o.Provider)
			if o.batch != nil {
				// A call parked in a provider batch holds its message: enough of them
				// must fit to fill a provider batch.
				concurrency = max(concurrency, o.JudgeModes.waiting())
			}
		}
		sub := bus.NewSubscriber(js, bus.SubscriberConfig{Stream: cfg.Stream, Concurrency: concurrency, AckWait: cfg.AckWait, Logger: o.Logger,
			Tenants: cfg.Tenants, TenantQuota: o.TenantQuota, ShutdownGrace: grace})
		router, err := bus.NewRouter(bus.RouterConfig{Service: svc, MaxDeliver: cfg.MaxDeliver, CloseTimeout: closeTimeout,
			DeadLetters: deadLetters, Chain: svc != bus.Aggregator, Logger: o.Logger}, sub, r.Pub, h)
		if err != nil {
			cancel()
			return nil, err
		}
		r.routers[svc] = router
		r.subs = append(r.subs, sub)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := router.Run(runCtx); err != nil {
				o.Logger.Error("router stopped", "service", svc, "err", err)
			}
		}()
	}
	for svc, router := range r.routers {
		select {
		case <-router.Running():
		case <-time.After(30 * time.Second):
			r.Close()
			return nil, fmt.Errorf("service %s did not start", svc)
		}
	}
	// Every instance of a service reads the same backlog from the server; one of them,
	// elected per service, exports it, so sums over instances are right.
	holder := o.Instance + "-" + nuid.Next()
	for svc := range r.routers {
		lease, err := bus.Elect(pctx, js, bus.LeaseConfig{Key: "pending." + svc, Holder: holder, Replicas: cfg.Replicas, Logger: o.Logger})
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("service %s: backlog reporter election: %w", svc, err)
		}
		r.leases = append(r.leases, lease)
		r.unwatch = append(r.unwatch, telemetry.Default().WatchPending(svc, consumerPending(js, cfg.Stream, bus.ConsumerNames(svc, cfg.Tenants)...), lease.Held))
	}
	return r, nil
}

// primeMetrics makes every metric the services of this process report exist at zero
// from start (telemetry.PrimeService and the others), so a fresh deployment's dashboard
// shows zeros, not "No data". The tenants must be set first.
func primeMetrics(services []string, p judge.Provider) {
	names := registry.Names()
	for _, svc := range services {
		var inputs []string
		for _, t := range bus.ServiceInputs[svc] {
			inputs = append(inputs, string(t))
		}
		if svc == bus.Aggregator {
			inputs = append(inputs, bus.DeadLetterType)
		}
		telemetry.PrimeService(svc, inputs)
		switch svc {
		case bus.Gater:
			telemetry.PrimeGater(names)
		case bus.Aggregator:
			telemetry.PrimeAggregator(names)
		case bus.Judge:
			if p != nil {
				telemetry.PrimeJudge(p.Name(), p.DefaultModel(), names)
				telemetry.PrimeProvider(p.Name(), p.DefaultModel(), names)
			}
		case bus.Renderer:
			if p != nil {
				var reqs []string
				for _, k := range registry.All() {
					if r, ok := k.(kind.Requesting); ok {
						reqs = append(reqs, r.RenderRequests()...)
					}
				}
				telemetry.PrimeProvider(p.Name(), p.DefaultModel(), reqs)
			}
		}
	}
}

// judgeConcurrency is how many messages the judge service holds at once. A message holds
// its subscriber slot through all of its handling (reading the artifacts, the cache,
// storing and publishing the verdict) but a provider slot only during the call, so with
// as many messages as the provider has slots, every call's bookkeeping left a slot idle:
// 64 calls in flight averaged 57-61 on a loaded machine. When the provider bounds its own
// calls at or under concurrency, the judge service gets at least a quarter more messages
// than that, which keep its slots busy while their calls queue at the provider's bound.
// A provider without a bound, or with a wider one, leaves concurrency as it is, so the
// calls in flight never exceed what either bound says.
func judgeConcurrency(concurrency int, p judge.Provider) int {
	b, ok := p.(judge.Bounded)
	if !ok {
		return concurrency
	}
	calls := b.MaxInFlight()
	if calls <= 0 || calls > concurrency {
		return concurrency
	}
	return max(concurrency, calls+(calls+3)/4)
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	// Lines logged with a handler's context name its tenant, batch, job and trace.
	o.Logger = telemetry.WithContext(o.Logger)
	if o.Services == nil {
		o.Services = bus.Services
	}
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	return o
}

// validate refuses options that could only fail later, mid-batch or after the bus was
// provisioned: an unknown or repeated service, a service without its blob store, a judge
// without a provider, negative bounds.
func (o Options) validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, svc := range o.Services {
		switch {
		case !slices.Contains(bus.Services, svc):
			errs = append(errs, fmt.Errorf("unknown service %q (want %s)", svc, strings.Join(bus.Services, ", ")))
		case seen[svc]:
			errs = append(errs, fmt.Errorf("service %q named twice", svc))
		}
		seen[svc] = true
	}
	if len(o.Services) > 0 && o.Store == nil {
		errs = append(errs, errors.New("services need a blob store (Store)"))
	}
	if seen[bus.Judge] && o.Provider == nil {
		errs = append(errs, errors.New("judge service needs a provider"))
	}
	for name, v := range map[string]int64{"Concurrency": int64(o.Concurrency), "TenantQuota": int64(o.TenantQuota),
		"ShutdownGrace": int64(o.ShutdownGrace), "CloseTimeout": int64(o.CloseTimeout)} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %d", name, v))
		}
	}
	if o.Spend != nil {
		if err := o.Spend.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("Spend: %w", err))
		}
	}
	if o.Concurrency > 0 && o.TenantQuota > o.Concurrency {
		errs = append(errs, fmt.Errorf("TenantQuota %d exceeds Concurrency %d", o.TenantQuota, o.Concurrency))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("app options: %w", err)
	}
	return nil
}

// provider is o.Provider held to the shared rate limits and instrumented, or nil.
func (o Options) provider(ctx context.Context, js jetstream.JetStream) (judge.Provider, error) {
	p := o.Provider
	if p == nil {
		return nil, nil
	}
	if o.RateLimits != nil {
		lim, err := ratelimit.New(ctx, js, *o.RateLimits)
		if err != nil {
			return nil, err
		}
		jl := lim.ForJudge()
		jl.Log = o.Logger
		// One wrapper for every caller in this process, so judge and runner calls draw
		// from the same buckets and a 429 seen by either slows both.
		p = judge.Limited(p, jl)
	}
	p = judge.Priced(p, o.priceTable())
	// Around the limits, so a call's span and duration include its wait for them.
	return o.budgeted(ctx, js, instrument.Provider(p), budget.DefaultHoldFor)
}

// priceTable is the table calls are priced with.
func (o Options) priceTable() *price.Table {
	if o.Prices == nil {
		return price.Default()
	}
	return o.Prices
}

// budgeted holds p to the budgets. They stand outermost: a call a budget refuses is no
// provider call, waits for no rate and is measured as none. With team budgets the bucket
// is opened at start, so a deployment that cannot keep them does not start; otherwise it
// is opened when a batch first brings a budget of its own. An unsettled reservation
// expires after holdFor, past the longest p's calls take.
func (o Options) budgeted(ctx context.Context, js jetstream.JetStream, p judge.Provider, holdFor time.Duration) (judge.Provider, error) {
	ledger := budget.Lazy(js, "", o.BudgetReplicas)
	if len(o.TenantBudgets) > 0 {
		var err error
		if ledger, err = budget.Open(ctx, js, "", o.BudgetReplicas); err != nil {
			return nil, err
		}
	}
	return budget.Provider(p, ledger, budget.Config{Tenants: o.TenantBudgets, Log: o.Logger, HoldFor: holdFor}), nil
}

// handler builds service svc over the buckets (validate has checked svc and what it
// needs).
func (o Options) handler(svc string, buckets bus.Buckets, provider judge.Provider) (bus.Handler, func(context.Context, bus.DeadLetter) ([]events.Event, error)) {
	switch svc {
	case bus.Renderer:
		sensors := o.Sensors
		if sensors == nil {
			sensors = &renderer.Sensors{}
		}
		// The renderer runs equivalence documents through the provider (an LLM applies
		// each document to each case; teacher transcripts are cached in the shared
		// bucket); without one, such jobs are blocked.
		env := stage.RenderEnv{Sensors: sensors, Cache: buckets.Cache, Params: o.Params, Instance: o.Instance, Log: o.Logger}
		if provider != nil {
			env.Provider = provider
		}
		var opts []renderer.Option
		if o.Spend != nil {
			opts = append(opts, renderer.WithSpend(*o.Spend))
		}
		return renderer.New(o.Store, o.Fetch, env, opts...).Handle, nil
	case bus.Gater:
		return gater.New(stage.GateEnv{Store: o.Store, Views: buckets.Views, Gates: o.Gates, Log: o.Logger}).Handle, nil
	case bus.Judge:
		return o.judgeService(buckets, provider).Handle, nil
	default:
		agg := aggregator.New(buckets, o.Store, o.Logger)
		return agg.Handle, agg.DeadLetter
	}
}

// Ready reports whether the connection is up and every router runs.
func (r *Running) Ready() error {
	if !r.nc.IsConnected() {
		return fmt.Errorf("nats: %s", r.nc.Status())
	}
	for svc, router := range r.routers {
		if !router.IsRunning() {
			return fmt.Errorf("service %s: not running", svc)
		}
	}
	return nil
}

// Close stops every router: no new messages are taken, in-flight handlers finish (up to
// the shutdown grace, then they are cancelled and their messages go back) and messages
// pulled but not started go back to the server at once.
func (r *Running) Close() {
	var wg sync.WaitGroup
	for _, router := range r.routers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = router.Close()
		}()
	}
	wg.Wait()
	r.cancel()
	r.wg.Wait()
	if r.closeBatch != nil {
		r.closeBatch()
	}
	for _, stop := range r.unwatch {
		stop()
	}
	for _, l := range r.leases {
		l.Close()
	}
}

// consumerPending asks JetStream for a service's durable consumers' backlogs at scrape
// time: messages not yet delivered plus delivered and not yet acked, across every
// instance bound to them.
func consumerPending(js jetstream.JetStream, stream string, consumers ...string) telemetry.PendingFunc {
	return func(ctx context.Context) (map[string]uint64, error) {
		out := make(map[string]uint64, len(consumers))
		for _, name := range consumers {
			c, err := js.Consumer(ctx, stream, name)
			if err != nil {
				return nil, err
			}
			info := c.CachedInfo()
			out[name] = info.NumPending + uint64(max(info.NumAckPending, 0))
		}
		return out, nil
	}
}

// MetricsHandler serves the process's Prometheus metrics (every service it runs, plus
// the Go runtime), for a process that mounts it on a server of its own.
func MetricsHandler() http.Handler { return telemetry.Handler() }

// ServeHealth serves /healthz (the process is alive), /readyz (connected and every
// service running) and /metrics (Prometheus) on addr until ctx ends. It returns the
// bound address.
func ServeHealth(ctx context.Context, addr string, ready func() error, log *slog.Logger) (string, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", MetricsHandler())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("health endpoint %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health endpoint stopped", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}
