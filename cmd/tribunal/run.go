package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/localstate"
	"github.com/tribunal-dev/tribunal/internal/memlimit"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

type runFlags struct {
	out          string
	tenant       string
	dataDir      string
	ephemeral    bool
	blobURL      string
	asJSON       bool
	quiet        bool
	allowOutside bool
	allowPrivate bool
	concurrency  int
	timeout      time.Duration
	adapters     []string
	gates        []string
	adapterEnv   []string
	console      string
	metrics      string
	cfn          bool
	rerun        bool
	dryRun       bool
	acs          []string
	targets      []string
	screens      []string
	minFree      byteSize
	judge        judgeFlags
	ci           ciFlags
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run <batch>",
		Short: "Judge a batch in one process (embedded NATS, file blob store, all four services)",
		Long: `run is the all-in-one mode: it starts a real NATS server with JetStream inside the process,
a file blob store and the renderer, gater, judge and aggregator services, submits the batch,
shows progress, prints a results table and writes results.json and manifest.json into the
output folder. Nothing needs to be installed and, with the default scripted judge, no API key.

A rubric AC that names no mode runs interactive when standard input is a terminal (the
seed's default: the first sign-off of the run pauses for the HE-2 spot-check, answered at
the prompt with y or the rubric dimension the judge got wrong, and the run's other views
wait for the answer) and headless otherwise. --target (or --screen) converges only the
named targets of the batch's rubric features, as seed 004's target: does.

A batch whose every decision-relevant input (the batch file, every artifact's bytes, the
judge and its settings, the options, tribunal's build) is unchanged since a batch that
completed in the same state folder is not judged again: the run says which batch's results
stand and prints and writes them again, with that batch's exit code, asking the provider
nothing. --rerun judges it anew.

The exit code is the batch's: 0 clean, 1 findings, 3 schema violation, 4 every AC blocked
(2 is a usage or configuration error: with --judge openai, the provider is probed first,
and one that cannot work, with no key, no server or a refused key, stops the run here).

A run keeps --min-free of its state folder's disk free: when less is left it stops taking
work, stores what is in flight and exits 2 saying "no space left" and where. The same
command, run again once there is space, continues that batch and pays only for ACs never
judged; so does a run after Ctrl-C or --timeout.`,
		Example: `  # the offline quickstart (scripted judge: recorded answers, no model)
  tribunal run examples/quickstart

  # judge with a real model through any OpenAI-compatible API
  OPENAI_API_KEY=... tribunal run examples/quickstart --judge openai --judge-model gpt-4o-mini

  # a local model served by Ollama
  tribunal run examples/quickstart --judge openai --openai-base-url http://localhost:11434/v1 --judge-model llama3.2-vision

  # two ACs only, and the manifest where cfn-ab-critic's vote step finds it
  tribunal run examples/quickstart --ac AC-1,AC-2 --cfn`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runAllInOne(cmd.Context(), f, args[0]) },
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.out, "out", "o", "out", "folder results are written to (one subfolder per batch)")
	fs.StringVar(&f.tenant, "tenant", "", "tenant (team) to submit as; default the batch's, else \"default\"")
	fs.StringVar(&f.dataDir, "data-dir", "", "keep the NATS store and blobs in this folder (default "+localstate.DirName+" in the current folder, kept and reused by every later run there)")
	fs.BoolVar(&f.ephemeral, "ephemeral", false, "keep the NATS store and blobs in a temporary folder removed at exit: nothing carries over to the next run")
	fs.StringVar(&f.blobURL, "blob", "", "blob store URL instead of the data folder (file:///dir or s3://bucket?endpoint=...)")
	fs.BoolVar(&f.asJSON, "json", false, "print the results as JSON")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	fs.BoolVar(&f.allowOutside, "allow-outside", false, "allow artifact paths outside the batch folder")
	fs.BoolVar(&f.allowPrivate, "allow-private-urls", false, "allow artifact URLs on loopback, private and link-local addresses")
	fs.IntVar(&f.concurrency, "concurrency", 64, "messages in flight per service")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long (0: no limit)")
	fs.StringVar(&f.console, "console", "", "serve the web console on this address while the batch runs, e.g. 127.0.0.1:8090")
	fs.StringVar(&f.metrics, "metrics", "", "serve /metrics, /healthz and /readyz on this address while the batch runs")
	fs.StringArrayVar(&f.gates, "gates-adapter", nil, "rubric: a gates command, name=/path/to/gates.sh, printing build/lint/type_check/token_compliance/snapshot/flows as JSON, instead of the project's argus/adapters/<name>/gates.sh (repeatable)")
	fs.StringArrayVar(&f.adapters, "adapter", nil, "rubric: a command sensor adapter, name=/path/to/sense.sh, instead of the project's argus/adapters/<name>/sense.sh (repeatable; web is built in)")
	fs.StringSliceVar(&f.adapterEnv, "adapter-env", nil, adapterEnvHelp)
	fs.BoolVar(&f.cfn, "cfn", false, cfnFlagHelp)
	fs.BoolVar(&f.rerun, "rerun", false, rerunFlagHelp)
	fs.BoolVar(&f.dryRun, "dry-run", false, "start nothing: print what the run would judge and its estimate (calls, tokens, money at the judge's price), as tribunal validate does")
	fs.StringSliceVar(&f.acs, "ac", nil, "judge only these ACs of the batch (comma-separated ids, as cfn-ab-critic's --ac; a rubric view's job id judges that view alone)")
	fs.StringSliceVar(&f.targets, "target", nil, "rubric: converge only these targets of the batch's features (comma-separated target ids, seed 004's target:)")
	fs.StringSliceVar(&f.screens, "screen", nil, "rubric: the same as --target (seed 004's alias screen:)")
	f.minFree = defaultMinFree
	fs.Var(&f.minFree, "min-free", "stop the run, storing what is in flight, when less than this is free on the state folder's disk (exit 2, \"no space left\")")
	f.judge.register(fs)
	f.ci.register(fs)
	// What the batch may spend: anything by default, its one user spends its own key.
	f.judge.spend.register(fs, false)
	return cmd
}

func runAllInOne(ctx context.Context, f *runFlags, path string) error {
	if err := f.ci.check(); err != nil {
		return exitError{2, err}
	}
	if _, err := f.judge.modes(); err != nil {
		return exitError{2, err}
	}
	b, err := batch.Load(path)
	if err != nil {
		return exitError{2, err}
	}
	if err := selectRun(b, f.acs, append(append([]string(nil), f.targets...), f.screens...), f.allowOutside); err != nil {
		return exitError{2, err}
	}
	for _, r := range b.Rejected {
		fmt.Fprintln(os.Stderr, "skipped:", r)
	}
	tenant := cmp.Or(f.tenant, b.Tenant, "default")
	if f.dryRun {
		// What the run would do and cost, priced for its judge; nothing starts.
		return showPlan(ctx, os.Stdout, b, tenant, f.allowOutside, false, f.asJSON, &f.judge.prices, f.judge.provider, f.judge.model, f.judge.planPolicy())
	}
	// The seed's default mode is interactive: on a terminal a rubric AC that names no mode
	// pauses for HE-2 at the first sign-off of the run; without a terminal nobody could
	// answer, so it runs headless.
	terminal := isatty.IsTerminal(os.Stdin.Fd())
	defaultMode := events.ModeHeadless
	if terminal {
		defaultMode = events.ModeInteractive
	}
	interactive := false
	var prompting []events.Kind // the kinds of the interactive entries, once each
	for _, ac := range b.ACs {
		k := events.Kind(b.KindOf(ac))
		if _, looping := registry.Looping(k); looping && cmp.Or(ac.ModeOf(), defaultMode) == events.ModeInteractive {
			interactive = true
			if !slices.Contains(prompting, k) {
				prompting = append(prompting, k)
			}
		}
	}
	if interactive && f.console == "" && !terminal {
		return exitError{2, fmt.Errorf("%s: interactive rubric mode asks a person on this terminal, but standard input is not one: use mode headless here, or the services with `tribunal spotcheck`", b.Path)}
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	dataDir, ephemeral := f.dataDir, f.ephemeral
	switch {
	case ephemeral && dataDir != "":
		return exitError{2, fmt.Errorf("--ephemeral and --data-dir exclude each other: a temporary folder or %s", dataDir)}
	case ephemeral:
		if dataDir, err = os.MkdirTemp("", "tribunal-run-"); err != nil {
			return err
		}
		defer os.RemoveAll(dataDir)
	default:
		lock, err := lockState(ctx, cmp.Or(dataDir, localstate.DirName), "run", f.quiet)
		if err != nil {
			return err
		}
		defer lock.Release()
		dataDir = lock.Dir()
	}
	// The state folder's disk: a run that would fill it stops first, storing what is in
	// flight (see defaultMinFree); one that starts on a full disk stops at once.
	guard := diskspace.NewGuard(int64(f.minFree), dataDir)
	if err := guard.Check(); err != nil {
		return noSpaceError(err, "", 0, 0)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go guard.Watch(ctx, spaceCheckInterval)
	go func() {
		select {
		case <-guard.Done():
			stop(guard.Err())
		case <-ctx.Done():
		}
	}()
	// The run serves feature folders on loopback ports of its own choosing, and renders
	// only its own user's apps: no host list here.
	// One user's own machine: the adapters a feature's project ships run here too.
	af := adapterFlags{sensors: f.adapters, gates: f.gates, env: f.adapterEnv}
	sensors, err := sensorsFromFlags(af, nil, true)
	if err != nil {
		return exitError{2, err}
	}
	gates, err := gatesFromFlags(af, true)
	if err != nil {
		return exitError{2, err}
	}
	// Checked before anything is published, as submit checks a direct submission.
	allowance, err := f.judge.spend.allowance(tenant, "")
	if err != nil {
		return exitError{2, err}
	}
	features := &featureServer{}
	defer features.Close()
	notes := io.Writer(os.Stderr)
	if f.quiet {
		notes = nil
	}
	a := &allInOne{batch: b, tenant: tenant, dataDir: dataDir, ephemeral: ephemeral, blobURL: f.blobURL, concurrency: f.concurrency,
		jf: &f.judge, fetch: artifact.FetchOptions{AllowPrivate: f.allowPrivate}, sensors: sensors, gates: gates,
		submitter: client.Submitter{AllowOutside: f.allowOutside, ServeFeature: features.serve, DefaultMode: defaultMode, Spend: allowance},
		force:     f.rerun, notes: notes, options: runOptions(f, defaultMode), guard: guard}
	defer a.Close()
	if err := a.open(ctx); err != nil {
		return err
	}
	applyMemoryLimit(memoryLimitFor(len(b.ACs)))
	if res, e := a.standing(ctx); res != nil {
		a.standsNote(e)
		return finishRun(f, b, res)
	}
	if err := a.start(ctx); err != nil {
		return err
	}
	env := a.env
	if f.console != "" {
		cctx, ccancel := context.WithCancel(ctx)
		addr, wait, err := startConsole(cctx, f.console, console.Config{Buckets: env.Running.Buckets, Store: env.Store, Pub: env.Running.Pub,
			Logger: slog.Default(), Audit: auditHook(env.Running.JS, env.Running.Buckets, env.Store, ""),
			Report: reportHook(env.Running.JS, env.Running.Buckets, "")})
		if err != nil {
			ccancel()
			return exitError{2, err}
		}
		defer func() { ccancel(); wait() }()
		fmt.Fprintf(os.Stderr, "console: http://%s\n", addr)
	}
	if f.metrics != "" {
		mctx, mcancel := context.WithCancel(ctx)
		defer mcancel()
		addr, err := app.ServeHealth(mctx, f.metrics, env.Running.Ready, slog.Default())
		if err != nil {
			return exitError{2, err}
		}
		fmt.Fprintf(os.Stderr, "metrics: http://%s/metrics\n", addr)
	}

	s, err := a.submit(ctx, client.NewBatchID(b))
	if err != nil {
		return a.stopped(ctx, s, client.Progress{Total: s.Jobs}, err)
	}
	progress := newProgress(os.Stderr, f.quiet || f.asJSON)
	var last client.Progress
	report := func(p client.Progress) {
		last = p
		progress.report(p)
	}
	if interactive && f.console == "" {
		// A person on this terminal (rubric's HE-2), asked while the progress goes on: each
		// interactive kind's prompt (stage.Prompting).
		if prompts := terminalPrompts(prompting, env, s.Tenant, s.BatchID); len(prompts) > 0 {
			report = func(p client.Progress) {
				last = p
				progress.report(p)
				for _, pr := range prompts {
					pr.Step(ctx)
				}
			}
		}
	}
	comp, err := client.Watch(ctx, env.Running.Buckets, s.Tenant, s.BatchID, 100*time.Millisecond, report)
	if err != nil {
		return a.stopped(ctx, s, last, fmt.Errorf("batch %s: %w", s.BatchID, err))
	}
	res, err := client.Load(ctx, env.Running.Buckets, env.Store, s.Tenant, s.BatchID)
	if err != nil {
		return err
	}
	a.remember(s.BatchID, comp)
	return finishRun(f, b, res)
}

// finishRun writes a completed batch's results where the run's flags ask and prints
// them, ending with the batch's exit code: the same for a batch judged now and for one
// whose results stand for an unchanged rerun.
func finishRun(f *runFlags, b *batch.Batch, res *client.Results) error {
	outDir, err := res.Write(f.out)
	if err != nil {
		return err
	}
	// A batch with argus_runs also keeps the seed's files in each feature's .argus-runs/.
	written, err := res.WriteBeside(b.Dir)
	if err != nil {
		return err
	}
	if len(written) > 0 && !f.quiet {
		fmt.Fprintf(os.Stderr, "argus runs: %s under the features' .argus-runs/\n", plural(len(written)-len(res.Applied), "file"))
	}
	for _, c := range res.Applied {
		fmt.Fprintln(os.Stderr, "spec changed:", c)
	}
	if f.cfn {
		if err := writeCFN(res); err != nil {
			return err
		}
	}
	if err := printResults(os.Stdout, res, outDir, f.asJSON); err != nil {
		return err
	}
	if err := f.ci.write(annotationsTo(f.asJSON), res, b); err != nil {
		return err
	}
	if code := f.ci.exitCode(res); code != 0 {
		return exitError{code: code}
	}
	return nil
}

// runOptions are the run's settings, beyond the batch and the judge, that can reach a
// decision: they are part of an unchanged rerun's key.
func runOptions(f *runFlags, defaultMode string) map[string]string {
	return map[string]string{
		"allow_outside": strconv.FormatBool(f.allowOutside), "allow_private_urls": strconv.FormatBool(f.allowPrivate),
		"default_mode": defaultMode, "adapters": strings.Join(f.adapters, "\x00"), "gates_adapters": strings.Join(f.gates, "\x00"),
		"adapter_env": strings.Join(f.adapterEnv, "\x00"), "blob": f.blobURL,
	}
}

// terminalPrompts opens the prompts of kinds (stage.Prompting) on this run's terminal over
// the batch's state, all reading standard input's lines from one reader.
func terminalPrompts(kinds []events.Kind, env *embedded, tenant, batchID string) []stage.Prompt {
	st := stage.CommandState{Buckets: env.Running.Buckets, Store: env.Store, Pub: env.Running.Pub}
	var lines <-chan string
	var out []stage.Prompt
	for _, name := range kinds {
		k, err := registry.Lookup(name)
		if err != nil {
			continue
		}
		if pk, ok := k.(stage.Prompting); ok {
			if lines == nil {
				lines = stdinLines(os.Stdin)
			}
			out = append(out, pk.Prompt(lines, os.Stderr, st, tenant, batchID))
		}
	}
	return out
}

// stdinLines reads in's lines on a goroutine of their own, closing the channel when in
// ends, so a prompt can take an answer without waiting for one.
func stdinLines(in io.Reader) <-chan string {
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		r := bufio.NewReader(in)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return lines
}

// cfnFlagHelp is --cfn's help on run and results.
const cfnFlagHelp = "also write the ab manifest where the cfn-ab-critic vote step looks for it: <project-root>/.cfn-cache/manifests/cfn-ab-critic-<ns>.json, the project root being the nearest folder holding .cfn-cache or .git"

// writeCFN writes the ab manifest under the project root (client.CFNRoot from the
// current folder) for the seed's vote step (--cfn on run and results) and says where.
func writeCFN(res *client.Results) error {
	root, err := client.CFNRoot(".")
	if err != nil {
		return err
	}
	p, err := res.WriteCFN(root, time.Now())
	if err != nil {
		return err
	}
	if p == "" {
		fmt.Fprintln(os.Stderr, "--cfn: the batch has no ab ACs, so there is no ab manifest to write")
		return nil
	}
	fmt.Fprintln(os.Stderr, "cfn manifest:", p)
	return nil
}

// embedded is an all-in-one tribunal: an in-process NATS server, a blob store and the
// four services.
type embedded struct {
	Running *app.Running
	Store   blob.Store
	// guard, when set before open, watches the state folder's space: the server and the
	// store trip it when a write finds the disk full (run).
	guard *diskspace.Guard
	ns    *server.Server
	nc    *nats.Conn
	close []func()
	// removing is a temporary folder's blob store being removed while the server shuts
	// down (the two take about as long), waited for before Close returns.
	removing sync.WaitGroup
}

func (e *embedded) Close() {
	if e.guard != nil && e.ns != nil && failedWrite(e.guard.Err()) {
		// A write found the disk full: JetStream has disabled itself and nothing more can
		// be stored, so the handlers in flight are not waited for (they would retry their
		// publishes for the whole shutdown grace). Closing the connection first fails
		// them at once.
		if e.nc != nil {
			e.nc.Close()
		}
		e.ns.Shutdown()
	}
	for i := len(e.close) - 1; i >= 0; i-- {
		e.close[i]()
	}
	e.close = nil
}

// localReadyTimeout bounds the wait for the embedded server to recover a state folder.
const localReadyTimeout = 10 * time.Minute

// open starts the embedded NATS server on dataDir/nats, connects to it in-process and
// opens the blob store (blobURL, else dataDir/blobs, unsynced when ephemeral); Close
// undoes all of it, also when open fails half-way.
func (e *embedded) open(ctx context.Context, dataDir string, ephemeral bool, blobURL string) (*nats.Conn, error) {
	// A state folder grows with every run kept in it, and the server recovers the whole
	// stream before it answers (about 15 s for 600,000 events on an idle 2-vCPU machine,
	// over 30 s under load): wait as long as a large state needs, saying why.
	eo := natsserver.Options{StoreDir: filepath.Join(dataDir, "nats"), ReadyTimeout: localReadyTimeout,
		OnSlow: func(waited time.Duration) {
			fmt.Fprintf(os.Stderr, "state: the embedded NATS server is still recovering %s after %s (a large state takes a while; it waits up to %s)\n",
				filepath.Join(dataDir, "nats"), waited.Round(time.Second), localReadyTimeout)
		}}
	if e.guard != nil {
		eo.OnNoSpace = e.guard.Trip
	}
	ns, err := natsserver.Start(eo)
	if err != nil {
		return nil, err
	}
	e.ns = ns
	e.close = append(e.close, func() { ns.Shutdown(); ns.WaitForShutdown(); e.removing.Wait() })
	nc, err := natsserver.InProcessConn(ns)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.close = append(e.close, func() {
		// The services' last acks and hand-backs are asynchronous: a round trip makes the
		// server take them before it shuts down, or their messages would wait out AckWait
		// (30 s) when the next run continues their batch.
		_ = nc.FlushTimeout(5 * time.Second)
		nc.Close()
	})
	if blobURL != "" {
		e.Store, err = blob.OpenURL(ctx, blobURL)
	} else {
		// Packed: a run's many small artifacts and call records cost a file each otherwise.
		e.Store, err = fileblob.New(filepath.Join(dataDir, "blobs"), fileblob.Options{NoSync: ephemeral, Pack: true})
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	closeStore := func() { _ = e.Store.Close() }
	if ephemeral && blobURL == "" {
		// Nothing in a temporary folder outlives the process: its blobs go while the
		// server shuts down, and the caller removes what is left.
		dir := filepath.Join(dataDir, "blobs")
		closeStore = func() {
			_ = e.Store.Close()
			e.removing.Go(func() { _ = os.RemoveAll(dir) })
		}
	}
	e.close = append(e.close, closeStore)
	if e.guard != nil && blobURL == "" {
		e.Store = guardedStore{Store: e.Store, guard: e.guard, path: filepath.Join(dataDir, "blobs")}
	}
	e.nc = nc
	return nc, nil
}

// services are the settings of the four services the all-in-one mode runs.
type services struct {
	provider    judge.Provider
	params      judge.Params
	concurrency int
	jf          *judgeFlags
	fetch       artifact.FetchOptions
	sensors     *renderer.Sensors
	gates       *command.Gates
}

// start runs the four services on the server and store open opened.
func (e *embedded) start(ctx context.Context, s services) error {
	policy, err := s.jf.spend.policy("")
	if err != nil {
		return err
	}
	modes, err := s.jf.modes()
	if err != nil {
		return err
	}
	prices, err := s.jf.prices.tableOf()
	if err != nil {
		return exitError{2, err}
	}
	published, err := e.published(ctx)
	if err != nil {
		return err
	}
	e.Running, err = app.Start(ctx, e.nc, app.Options{JudgeModes: modes, Bus: localBus(), Published: published,
		Store: e.Store, Provider: s.provider, Params: s.params, Instance: "all-in-one", Concurrency: s.concurrency,
		Fetch: s.fetch, Sensors: s.sensors, Gates: s.gates, RateLimits: s.jf.rateLimits(), Spend: policy, CloseTimeout: 10 * time.Second, Logger: slog.Default(),
		Prices: prices,
	})
	if err != nil {
		return err
	}
	e.close = append(e.close, e.Running.Close)
	return nil
}

// localDuplicateWindow is the duplicate window of the state folder's stream
// (bus.LocalDuplicateWindow), and localHorizon how long its services' publisher keeps
// the ids it has stored (bus.LocalHorizon); tests shorten them.
var (
	localDuplicateWindow = bus.LocalDuplicateWindow()
	localHorizon         = bus.LocalHorizon()
)

// localBus is the configuration of the state folder's stream, which every command that
// opens the folder provisions alike: the defaults, but a duplicate window of minutes,
// not hours. The folder is locked (lockState) for the one process whose embedded server
// runs on it, so that process's services' publisher is the stream's only one while it
// runs (view steps aside for any other command), and it keeps the ids it stored for the
// redelivery horizon itself (published): the server's window covers only a resend of a
// send whose ack never came (bus.LocalDuplicateWindow).
func localBus() bus.Config { return bus.Config{DuplicateWindow: localDuplicateWindow} }

// published reads the ids of the state folder's stream's tail, the initial content of the
// index of stored ids the services' publisher keeps for the horizon (bus.ReadPublished,
// bus.AlreadyPublished): the messages handed back or in flight when the folder's last
// process stopped are redelivered now, however long after, and their handlers publish
// again what they had; the handlers of this process's own redeliveries, what it stored.
func (e *embedded) published(ctx context.Context) (*bus.Published, error) {
	js, err := jetstream.New(e.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	start := time.Now()
	set, err := bus.ReadPublished(ctx, js, localStream, localHorizon)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	slog.Info("state: restored the message ids of the stream's tail", "ids", set.Len(), "horizon", localHorizon, "took", time.Since(start).Round(time.Millisecond))
	return set, nil
}

// startEmbedded starts the all-in-one mode in dataDir. ephemeral says dataDir is a
// temporary folder deleted at exit: its blobs skip fsync, as nothing in it can outlive
// the process anyway (JetStream's own file store syncs on an interval, not per write).
// defaultMemoryLimit is the all-in-one mode's soft memory limit: the Go runtime collects
// harder as the heap nears it, which keeps a 100,000-AC batch, whose completion reads
// every job back at once, inside 1 GiB. GOMEMLIMIT overrides it.
const defaultMemoryLimit = 640 << 20

// applyMemoryLimit sets the all-in-one mode's soft memory limit unless GOMEMLIMIT
// already did, and raises it with the live heap for as long as the process runs
// (memlimit.Follow): a fixed limit below the live heap of a larger batch than it was
// sized for keeps the collector running back to back.
func applyMemoryLimit(limit int64) {
	memlimit.Follow(context.Background(), limit, memlimit.Pipeline)
}

func startEmbedded(ctx context.Context, dataDir string, ephemeral bool, blobURL string, concurrency int, jf *judgeFlags, fetch artifact.FetchOptions, sensors *renderer.Sensors, gates *command.Gates) (*embedded, error) {
	applyMemoryLimit(defaultMemoryLimit)
	// A large batch's completion spills its rows (pkg/spillsort): into the state folder,
	// which is on disk, rather than the OS temp dir, which many systems keep in memory
	// (a tmpfs). The files are unlinked as soon as they are created.
	if spillsort.DefaultDir == "" {
		spillsort.DefaultDir = dataDir
	}
	// A provider that cannot work stops the run here, before any work, with the cause.
	provider, params, err := jf.build("all-in-one")
	if err != nil {
		return nil, err
	}
	if err := jf.check(ctx, provider, 3); err != nil {
		return nil, err
	}
	e := &embedded{}
	if _, err := e.open(ctx, dataDir, ephemeral, blobURL); err != nil {
		return nil, err
	}
	if sensors != nil {
		e.close = append(e.close, sensors.Close)
	}
	if err := e.start(ctx, services{provider: provider, params: params, concurrency: concurrency, jf: jf, fetch: fetch, sensors: sensors, gates: gates}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}
