package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

// connFlags say how to reach NATS and the blob store.
type connFlags struct {
	natsURL   string
	creds     string
	user      string
	password  string
	blobURL   string
	stream    string
	maxAge    time.Duration
	ackWait   time.Duration
	maxDeliv  int
	instance  string
	connectTO time.Duration
	tenants   []string
	quota     int
	// replicas and dupWindow are set by `tribunal serve` only: the services provision,
	// clients never do.
	replicas  int
	dupWindow time.Duration
	// local lets a reading command open the state folder tribunal run keeps instead
	// (registerLocal); nil for every other command.
	local *localReader
}

func (c *connFlags) register(fs *pflag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.natsURL, "nats", nats.DefaultURL, "NATS server URL(s), comma separated")
	fs.StringVar(&c.creds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.user, "nats-user", "", "NATS user (its password from TRIBUNAL_NATS_PASSWORD)")
	c.password = os.Getenv("TRIBUNAL_NATS_PASSWORD")
	fs.StringVar(&c.blobURL, "blob", "file://./tribunal-data/blobs", "blob store URL: file:///dir or s3://bucket?endpoint=host:9000&secure=false (S3 keys from TRIBUNAL_S3_ACCESS_KEY/TRIBUNAL_S3_SECRET_KEY)")
	fs.StringVar(&c.stream, "stream", "TRIBUNAL", "JetStream stream name")
	fs.DurationVar(&c.maxAge, "retention", 0, "how long the stream keeps events (the audit horizon; 0: forever)")
	fs.DurationVar(&c.ackWait, "ack-wait", 30*time.Second, "redeliver a message not acked within this (long handlers extend it)")
	fs.IntVar(&c.maxDeliv, "max-deliver", 8, "deliveries before a failing message goes to dead letters")
	fs.StringVar(&c.instance, "instance", host, "name of this process in verdicts and logs")
	fs.DurationVar(&c.connectTO, "connect-timeout", 30*time.Second, "how long to wait for NATS at start")
	fs.StringSliceVar(&c.tenants, "tenants", nil, "serve only these teams, each on its own durable consumers with an in-flight quota, so one team's huge batch cannot starve another's")
	fs.IntVar(&c.quota, "tenant-quota", 0, "with --tenants: messages of one team in flight per service in this process (default half of --concurrency)")
}

func (c *connFlags) busConfig() bus.Config {
	return bus.Config{Stream: c.stream, MaxAge: c.maxAge, AckWait: c.ackWait, MaxDeliver: c.maxDeliv, Tenants: c.tenants, Replicas: c.replicas, DuplicateWindow: c.dupWindow}
}

// clientPingInterval is how often a service's connection pings its server.
const clientPingInterval = 3 * time.Second

// clientWriteTimeout bounds one write to the server's socket. Over a link that went
// silent (a partition resets nothing) the socket's buffer fills and a write blocks, and
// nats.go holds the connection's lock while it writes, so the missed pings that would
// find the majority are not even counted until the write gives up: after nats.go's
// default minute. The partition test saw the judge, the busiest writer, stay on a cut
// member for three minutes. Two ping intervals is as long as a live server may take to
// read what it was sent; a write that takes longer reconnects (ReconnectOnFlusherError:
// by default nats.go only records the error).
const clientWriteTimeout = 2 * clientPingInterval

// connect dials NATS, retrying until connectTO, and reconnects forever afterwards: a
// NATS restart is ridden out, not fatal.
func (c *connFlags) connect() (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("tribunal " + c.instance), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		// A server cut off by a partition resets no connection: only missed pings tell.
		// The client's default (two of a ping every 2 minutes) held every service on a
		// partitioned member for minutes; this finds the majority within about 10 s.
		nats.PingInterval(clientPingInterval), nats.MaxPingsOutstanding(2),
		nats.FlusherTimeout(clientWriteTimeout), nats.ReconnectOnFlusherError(),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			// Close calls it too, with no error: every client command's clean exit is
			// no disconnection to warn about.
			if err == nil && nc.IsClosed() {
				return
			}
			slog.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { slog.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
	}
	if c.creds != "" {
		opts = append(opts, nats.UserCredentials(c.creds))
	}
	if c.user != "" {
		// A shipped placeholder (.env.example's) is no secret: anyone who read the example
		// could connect as this user.
		if marker, ok := tokens.Placeholder(c.password); ok {
			return nil, exitError{2, fmt.Errorf("TRIBUNAL_NATS_PASSWORD of NATS user %s is a placeholder (it reads %q), not a secret: "+
				"give the user its real password (docker compose: %s in .env, letters and digits such as `openssl rand -hex 24` prints; "+
				"tribunal tenants --credentials writes them)", c.user, marker, tenants.PasswordEnv(c.user))}
		}
		opts = append(opts, nats.UserInfo(c.user, c.password))
		if tenants.Generated(c.user) {
			// A user of `tribunal tenants` may only read its own reply inbox.
			opts = append(opts, nats.CustomInboxPrefix(tenants.InboxPrefix(c.user)))
		}
	}
	nc, err := nats.Connect(c.natsURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", c.natsURL, err)
	}
	deadline := time.Now().Add(c.connectTO)
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			nc.Close()
			return nil, fmt.Errorf("nats %s: not reachable after %s", c.natsURL, c.connectTO)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nc, nil
}

// defaultHealthAddr is where `serve` answers /healthz, /readyz and /metrics unless
// --health says otherwise: this machine only.
const defaultHealthAddr = "127.0.0.1:8080"

func newServeCmd() *cobra.Command {
	var conn connFlags
	var jf judgeFlags
	var health string
	var concurrency int
	var shutdownGrace time.Duration
	var allowPrivate, shareJudgeCache bool
	var natsListen, natsStore, natsConfig string
	var cluster natsserver.Options
	var adapters, gatesAdapters, adapterEnv, webAllow []string
	var webAllowPrivate bool
	var consoleAddr, ingressAddr, tokensFile string
	var quotas quotaFlags
	var cpuProfile, peakHeapProfile, spillDir string
	cmd := &cobra.Command{
		Use:   "serve <renderer|gater|judge|aggregator|all|nats|console|ingress>",
		Short: "Run a service as a long-lived process",
		Long: `serve runs one of tribunal's services against a NATS JetStream server and a blob store, with
/healthz, /readyz and Prometheus /metrics on --health. Run as many instances of a service as
you like: they share the service's durable consumer, so judges scale horizontally. "all" runs
the four services in one process; "nats" runs an embedded NATS server with JetStream (the
same build as the all-in-one mode) for a single host or for tests, or, with --server-name,
--cluster-listen and --routes, one member of a JetStream cluster: three of them, and the
services with --replicas 3, ride out the loss of any one server. "ingress" is the
teams' door (docs/security.md): an HTTP API on --ingress-addr where each team, holding only
its token from --tokens, stores artifacts, submits and reads its own batches; it holds the
NATS user and blob credentials itself.

Every flag can also be set through the TRIBUNAL_* environment variable named in its help.`,
		Example: `  tribunal serve nats --listen 127.0.0.1:4222 --store /var/lib/tribunal/nats
  tribunal serve nats --listen 0.0.0.0:4222 --store /var/lib/tribunal/nats --server-name n1 \
      --cluster-listen 0.0.0.0:6222 --routes nats://n1:6222,nats://n2:6222,nats://n3:6222
  tribunal serve all --nats nats://n1:4222,nats://n2:4222,nats://n3:4222 --replicas 3 --blob ...
  tribunal serve judge --nats nats://127.0.0.1:4222 --blob 's3://artifacts?endpoint=127.0.0.1:9000&secure=false' \
      --judge openai --judge-model gpt-4o-mini
  tribunal serve all --nats nats://127.0.0.1:4222 --blob file:///var/lib/tribunal/blobs
  tribunal serve ingress --nats nats://127.0.0.1:4222 --nats-user tribunal-ingress --blob file:///var/lib/tribunal/blobs \
      --tokens tokens.json --ingress-addr 0.0.0.0:8095`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"renderer", "gater", "judge", "aggregator", "all", "nats", "console", "ingress"},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			stopProfile, err := startProfiles(cpuProfile, peakHeapProfile)
			defer stopProfile() // written on SIGTERM, when the service returns
			if err != nil {
				return exitError{2, err}
			}
			if args[0] == "nats" {
				cluster.StoreDir, cluster.Listen, cluster.ConfigFile = natsStore, natsListen, natsConfig
				return serveNATS(ctx, cluster)
			}
			if args[0] == "console" {
				return serveConsole(ctx, &conn, consoleAddr, tokensFile, health)
			}
			if args[0] == "ingress" {
				return serveIngress(ctx, &conn, &jf, &quotas, ingressAddr, tokensFile, health)
			}
			var services []string
			switch args[0] {
			case "all":
				services = bus.Services
			case bus.Renderer, bus.Gater, bus.Judge, bus.Aggregator:
				services = []string{args[0]}
			default:
				return exitError{2, fmt.Errorf("unknown service %q: want renderer, gater, judge, aggregator, all, nats, console or ingress", args[0])}
			}
			if spillDir != "" && slices.Contains(services, bus.Aggregator) {
				// The completion's runs go to disk, not to a temp dir that may be memory.
				if err := spillsort.CheckDir(spillDir); err != nil {
					return exitError{2, fmt.Errorf("--spill-dir: %w", err)}
				}
				spillsort.DefaultDir = spillDir
			}
			// Teams share these services: only the operator's adapters run, never a
			// script a team's project ships.
			af := adapterFlags{sensors: adapters, gates: gatesAdapters, env: adapterEnv}
			sensors, err := servedSensorsFromFlags(af, webAllow, webAllowPrivate)
			if err != nil {
				return exitError{2, err}
			}
			gates, err := gatesFromFlags(af, false)
			if err != nil {
				return exitError{2, err}
			}
			return serveServices(ctx, &conn, &jf, services, health, concurrency, shutdownGrace, allowPrivate, shareJudgeCache, sensors, gates)
		},
	}
	fs := cmd.Flags()
	conn.register(fs)
	jf.register(fs)
	// judge, renderer and ingress each enforce what a team may spend.
	jf.spend.register(fs, true)
	jf.prices.registerBudgets(fs)
	// Loopback unless told: /metrics names teams and models, and a process on a shared
	// host must not show them to the network. A pod's probes and Prometheus reach it on
	// the pod's address, so the deployments set ":8080" (docs/operations.md, "Observe").
	fs.StringVar(&health, "health", defaultHealthAddr, "address of the /healthz, /readyz and /metrics endpoints (a container's probes and Prometheus need \":8080\", every interface: deploy/ sets it)")
	fs.IntVar(&concurrency, "concurrency", 64, "messages in flight per service in this process (backpressure)")
	fs.DurationVar(&shutdownGrace, "shutdown-grace", bus.DefaultShutdownGrace, "on SIGTERM, how long calls in flight may finish (their results are published) before they are cancelled and handed back; the default fits Kubernetes' 30 s termination grace period")
	fs.BoolVar(&allowPrivate, "allow-private-urls", false, "renderer: allow artifact URLs on loopback, private and link-local addresses")
	fs.BoolVar(&shareJudgeCache, "share-judge-cache", false, "judge: answer identical inputs of any tenant from one cache entry (fewer provider calls; a cached result then tells a team that another team judged the same content: docs/security.md)")
	fs.StringVar(&consoleAddr, "console-addr", "127.0.0.1:8090", "console: address of the web console")
	fs.StringVar(&ingressAddr, "ingress-addr", "127.0.0.1:8095", "ingress: address of the teams' HTTP API")
	quotas.register(fs)
	fs.StringVar(&tokensFile, "tokens", "", "console, ingress: JSON file {\"<token>\": \"<tenant>\"} for per-team access (tribunal tenants writes one; \"*\" sees every team in the console, the ingress refuses it); without it the console only listens on loopback and the ingress does not start")
	fs.StringArrayVar(&gatesAdapters, "gates-adapter", nil, "gater: a rubric gates command, name=/path/to/gates.sh (repeatable)")
	fs.StringArrayVar(&adapters, "adapter", nil, "renderer: a rubric command sensor, name=/path/to/sense.sh (repeatable; web is built in)")
	fs.StringSliceVar(&adapterEnv, "adapter-env", nil, "renderer, gater: "+strings.TrimPrefix(adapterEnvHelp, "rubric: "))
	fs.StringSliceVar(&webAllow, "web-allow-host", nil, "renderer: the only hosts the web sensor's browser may reach (host, host:port, *.domain or * for any; repeatable or comma-separated). Teams share a served renderer: without it every rubric route is refused")
	fs.BoolVar(&webAllowPrivate, "web-allow-private", false, "renderer: let the hosts of --web-allow-host resolve to loopback, private and link-local addresses (an internal staging app); without it they are reached on public addresses only, like artifact URLs without --allow-private-urls")
	fs.StringVar(&natsListen, "listen", "127.0.0.1:4222", "nats: client address to listen on")
	fs.StringVar(&natsStore, "store", "./tribunal-data/nats", "nats: JetStream store folder")
	fs.StringVar(&natsConfig, "config", "", "nats: nats-server configuration file (e.g. the authorization written by tribunal tenants)")
	fs.StringVar(&cluster.ServerName, "server-name", "", "nats: this server's name, unique in its cluster and kept across restarts (required with --cluster-listen)")
	fs.StringVar(&cluster.ClusterListen, "cluster-listen", "", "nats: address for routes from the other cluster members (e.g. 0.0.0.0:6222); makes this server a member of a JetStream cluster")
	fs.StringVar(&cluster.ClusterName, "cluster-name", "", "nats: the cluster's name, the same on every member (default \""+natsserver.DefaultClusterName+"\")")
	fs.StringSliceVar(&cluster.Routes, "routes", nil, "nats: cluster addresses of the members, nats://host:6222, comma separated; every member may get the same list")
	fs.StringVar(&spillDir, "spill-dir", "", "aggregator: folder of the spill files a large batch's completion writes its rows to (pkg/spillsort; default the OS temp dir, which in a container is often a tmpfs, memory): put it on disk")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process here when it stops on SIGTERM (go tool pprof)")
	fs.StringVar(&peakHeapProfile, "peak-heapprofile", "", "write a heap profile of this process here each time its in-use heap reaches a new high (go tool pprof): where a long batch's peak goes")
	fs.DurationVar(&conn.dupWindow, "duplicate-window", bus.DefaultDuplicateWindow, "how long the stream remembers event ids to drop the copies a redelivered handler, a resumed submission or a failover publishes (the server holds each id of the window in memory, about 0.6 KB per AC; at most --retention when that is set); an existing stream is updated to it")
	fs.IntVar(&conn.replicas, "replicas", 1, "copies of the event stream, its consumers and the key-value state on a JetStream cluster: 3 on a three-node cluster survives losing a node; an existing deployment is scaled to it")
	return cmd
}

// open connects to NATS and opens the blob store as a long-lived process does: both
// waited for at start, NATS reconnected forever. done closes both.
func (c *connFlags) open(ctx context.Context) (nc *nats.Conn, store blob.Store, done func(), err error) {
	if nc, err = c.connect(); err != nil {
		return nil, nil, nil, err
	}
	if store, err = openStore(ctx, c.blobURL, c.connectTO); err != nil {
		nc.Close()
		return nil, nil, nil, exitError{2, err}
	}
	return nc, store, func() { store.Close(); nc.Close() }, nil
}

func serveServices(ctx context.Context, conn *connFlags, jf *judgeFlags, services []string, health string, concurrency int, shutdownGrace time.Duration, allowPrivate, shareJudgeCache bool, sensors *renderer.Sensors, gates *command.Gates) error {
	nc, store, done, err := conn.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	opts := app.Options{Services: services, Bus: conn.busConfig(), Concurrency: concurrency, Store: store,
		Instance: conn.instance, Fetch: artifact.FetchOptions{AllowPrivate: allowPrivate}, Sensors: sensors, Gates: gates, TenantQuota: conn.quota, RateLimits: jf.rateLimits(), ShareJudgeCache: shareJudgeCache, ShutdownGrace: shutdownGrace, CloseTimeout: 30 * time.Second}
	if opts.RateLimits != nil {
		// The shared rate-limit bucket is state like the others: replicated alike.
		opts.RateLimits.Replicas = conn.replicas
	}
	if opts.Prices, err = jf.prices.tableOf(); err != nil {
		return exitError{2, err}
	}
	if opts.TenantBudgets, err = jf.prices.budgets(); err != nil {
		return exitError{2, err}
	}
	opts.BudgetReplicas = conn.replicas
	// The services know the judge's model from its provider.
	if opts.Spend, err = jf.spend.policy(""); err != nil {
		return exitError{2, err}
	}
	if opts.JudgeModes, err = jf.modes(); err != nil {
		return exitError{2, err}
	}
	defer sensors.Close()
	for _, s := range services {
		if s == bus.Judge || s == bus.Renderer {
			if opts.Provider, opts.Params, err = jf.build(conn.instance); err != nil {
				return exitError{2, err}
			}
		}
	}
	// The services start only once their provider passes the probe; until then /readyz
	// says why not.
	gate := startProviderGate(ctx, jf, opts.Provider)
	var running atomic.Pointer[app.Running]
	ready := func() error {
		if err := gate.Err(); err != nil {
			return err
		}
		if r := running.Load(); r != nil {
			return r.Ready()
		}
		return errors.New("starting")
	}
	addr, stopHealth, err := serveHealth(health, ready)
	if err != nil {
		return err
	}
	defer stopHealth()
	if err := gate.Wait(ctx); err != nil {
		return nil // stopped before the provider could work
	}
	r, err := app.Start(ctx, nc, opts)
	if err != nil {
		return err
	}
	running.Store(r)
	slog.Info("serving", "services", services, "instance", conn.instance, "health", addr)
	<-ctx.Done()
	slog.Info("shutting down: finishing in-flight messages", "services", services, "grace", shutdownGrace)
	r.Close()
	return nil
}

// serveHealth serves /healthz, /readyz and /metrics on addr (app.ServeHealth) until stop,
// which the caller defers: the probes outlive the command's context and answer until the
// command returns.
func serveHealth(addr string, ready func() error) (bound string, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	bound, err = app.ServeHealth(ctx, addr, ready, slog.Default())
	if err != nil {
		cancel()
		return "", nil, err
	}
	return bound, cancel, nil
}

// bucketsReady is the readiness of a command that serves once the services' buckets exist
// (up).
func bucketsReady(up bool) error {
	if !up {
		return errors.New("waiting for the services' buckets")
	}
	return nil
}

func serveNATS(ctx context.Context, o natsserver.Options) error {
	if err := os.MkdirAll(o.StoreDir, 0o750); err != nil {
		return err
	}
	abs, _ := filepath.Abs(o.StoreDir)
	o.StoreDir, o.Log = abs, true
	ns, err := natsserver.Start(o)
	if err != nil {
		return exitError{2, err}
	}
	// Through slog like the server's own lines: --log-format json keeps stderr JSON.
	slog.Info("nats listening", "url", ns.ClientURL(), "store", abs)
	if o.ClusterListen != "" {
		slog.Info("nats cluster member", "server_name", ns.Name(), "cluster", ns.ClusterName(), "routes_listen", o.ClusterListen, "routes", strings.Join(o.Routes, ","))
	}
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return nil
}

// openStore opens the blob store, retrying while it is unreachable: a service that
// starts during an object-store outage waits for it instead of exiting.
func openStore(ctx context.Context, rawURL string, wait time.Duration) (blob.Store, error) {
	deadline := time.Now().Add(wait)
	for {
		store, err := blob.OpenURL(ctx, rawURL)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return store, err
		}
		slog.Warn("blob store not reachable yet, retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// splitList is a comma-separated list, spaces trimmed and empty items dropped.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
