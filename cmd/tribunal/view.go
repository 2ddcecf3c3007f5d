package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/localstate"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// lockState prepares the state folder dir and takes it for command, waiting (and saying
// for whom on standard error) while another tribunal process holds it.
func lockState(ctx context.Context, dir, command string, quiet bool) (*localstate.Lock, error) {
	created, err := localstate.Prepare(dir)
	if err != nil {
		return nil, exitError{2, err}
	}
	if created && !quiet {
		fmt.Fprintf(os.Stderr, "state: created %s (kept for later runs and `tribunal view`; git ignores it; --ephemeral for a throwaway run)\n", dir)
	}
	return localstate.Acquire(ctx, dir, localstate.Me(command), localstate.Options{Signal: true, Waiting: func(h localstate.Holder) {
		if h.Command == "view" {
			fmt.Fprintf(os.Stderr, "%s has %s open; it steps aside for this %s\n", h, dir, command)
			return
		}
		fmt.Fprintf(os.Stderr, "%s is using %s; waiting for it to finish (Ctrl-C to stop; --data-dir DIR or --ephemeral runs beside it)\n", h, dir)
	}})
}

type viewFlags struct {
	dataDir string
	blobURL string
	listen  string
	tokens  string
	// export, when set, writes a static site of the batches into this folder instead of
	// serving the console.
	export  string
	batches string
}

func newViewCmd() *cobra.Command {
	f := &viewFlags{}
	cmd := &cobra.Command{
		Use:     "view",
		Aliases: []string{"console"},
		Short:   "Open the web console over the state `tribunal run` keeps (every past batch)",
		Long: `view opens the web console over the state folder that tribunal run keeps (.tribunal in
the current folder unless --data-dir names another): every past batch, newest first, with
its kinds, judges, counts and exit code, each AC's verdict un-blinded, the judge calls'
prompts and answers, charts, comparisons between batches and the audit.

It starts the embedded NATS server on the folder with the aggregator alone (no renderer,
gater or judge: nothing is rendered or judged), and the same console as tribunal serve
console. The aggregator is there for the two forms of a rubric view's page, which it
applies at once, as the audit then replays them: "Reset the loop" on a view whose run
ended (its budget spent, or frozen), so the next tribunal run starts the view's next loop
(as tribunal view-reset does), and the HE-2 spot-check of a sign-off that waits for a
person (approve, or the dimension the judge got wrong; as tribunal spotcheck does). On a
loopback address (the default) it needs no token; on any other address give --tokens, as
for serve console, and every form then takes the team's token and the console's CSRF
check.

One process uses a state folder at a time. When a tribunal run starts on the folder, the
view steps aside (its pages say so and reload) and opens the folder again when the run is
done, with the new batch in the list. A second view on the folder prints the first one's
address.

--export DIR writes the console as a static site into DIR instead of serving it: every
batch (or those --batch names) with its charts, every AC and judge call, the artifacts
as the console serves them, the trust report and the audit result, with every link
relative, so DIR/index.html opens from disk with no server and no network, and DIR can
be kept as a CI artifact. The pages carry no script; forms, filters and links to what is
not exported are left out.`,
		Example: `  tribunal run examples/quickstart
  tribunal view                      # http://127.0.0.1:8090
  tribunal view --listen 127.0.0.1:0 # any free port
  tribunal view --export site        # a static copy: open site/index.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runView(cmd.Context(), f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", localstate.DirName, "the state folder tribunal run keeps")
	fs.StringVar(&f.blobURL, "blob", "", "the blob store, when tribunal run was given --blob (default the state folder's)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8090", "address the console listens on")
	fs.StringVar(&f.tokens, "tokens", "", "JSON file {\"<token>\": \"<tenant>\"} for per-team access; required off loopback")
	fs.StringVar(&f.export, "export", "", "write a static, script-free site of the batches into this folder (opens from disk) instead of serving the console")
	// A string, as every other command's --batch (one variable, one type).
	fs.StringVar(&f.batches, "batch", "", "with --export: only these batches (comma-separated ids; default every batch)")
	return cmd
}

// viewPoll is how often a view checks whether a run waits for its folder.
const viewPoll = 500 * time.Millisecond

func runView(ctx context.Context, f *viewFlags) error {
	if !localstate.Exists(f.dataDir) {
		return exitError{2, fmt.Errorf("no tribunal state in %s: `tribunal run <batch>` keeps it there (or give --data-dir)", f.dataDir)}
	}
	if f.export != "" {
		return exportView(ctx, f)
	}
	teamTokens, err := tokens.Load(f.tokens)
	if err != nil {
		return exitError{2, err}
	}
	if len(teamTokens) == 0 && !loopbackAddr(f.listen) {
		return exitError{2, fmt.Errorf("console on %s without a tokens file would show every team's batches to anyone who reaches it: give --tokens or listen on 127.0.0.1", f.listen)}
	}
	me := localstate.Me("view")
	lock, holder, err := localstate.TryAcquire(f.dataDir, me)
	if err != nil {
		return exitError{2, err}
	}
	if lock == nil && holder.Command == "view" && holder.URL != "" {
		fmt.Printf("%s already shows %s at %s\n", holder, f.dataDir, holder.URL)
		return nil
	}
	page := &console.Starting{}
	busy := func(h localstate.Holder) {
		page.Hold(fmt.Sprintf("%s is using this state folder; the console opens it again when that is done.", h))
	}
	if lock == nil {
		busy(*holder)
	}
	cctx, cancel := context.WithCancel(ctx)
	addr, wait, err := startConsoleHandler(cctx, f.listen, page)
	if err != nil {
		cancel()
		return exitError{2, err}
	}
	// The server stops (cancel) before the wait for its last request, whatever the return.
	defer wait()
	defer cancel()
	url := "http://" + addr
	fmt.Printf("tribunal view: %s (state %s; Ctrl-C to stop)\n", url, f.dataDir)
	for {
		if lock == nil {
			fmt.Fprintf(os.Stderr, "%s is using %s; the console opens it when that is done\n", localstate.ReadHolder(f.dataDir), f.dataDir)
			if lock, err = localstate.Acquire(ctx, f.dataDir, me, localstate.Options{Waiting: busy}); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		env, err := openState(ctx, f.dataDir, f.blobURL, bus.Aggregator)
		if err != nil {
			lock.Release()
			return err
		}
		page.Start(console.Config{Buckets: env.Running.Buckets, Store: env.Store, Pub: env.Running.Pub, Tenants: teamTokens, Logger: slog.Default(),
			Reviewer: client.LocalReviewer(), Audit: auditHook(env.Running.JS, env.Running.Buckets, env.Store, ""), Report: reportHook(env.Running.JS, env.Running.Buckets, "")})
		if err := lock.SetURL(url); err != nil {
			slog.Warn("view: cannot record the console's address in the state folder", "err", err)
		}
		stepAside := waitWanted(ctx, lock)
		page.Hold("A tribunal run is using this state folder; the console opens it again when the run is done.")
		env.Close()
		lock.Release()
		lock = nil
		if !stepAside {
			return nil
		}
		fmt.Fprintf(os.Stderr, "stepping aside for a tribunal run on %s\n", f.dataDir)
		if err := localstate.WaitIdle(ctx, f.dataDir); err != nil {
			return nil
		}
	}
}

// waitWanted waits until a run waits for the folder (true) or ctx ends (false).
func waitWanted(ctx context.Context, lock *localstate.Lock) bool {
	t := time.NewTicker(viewPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if lock.Wanted() {
				return true
			}
		}
	}
}

// openState starts the embedded NATS server on dir and opens its buckets and blob store,
// as `tribunal run` does, and runs only the services named: none for a reader, the
// aggregator for a command whose events (a reset, a spot-check) must be applied while it
// holds the folder, since the next run could otherwise overtake them.
func openState(ctx context.Context, dir, blobURL string, services ...string) (*embedded, error) {
	e := &embedded{}
	nc, err := e.open(ctx, dir, false, blobURL)
	if err != nil {
		return nil, err
	}
	// Without services, provisioning only makes sure the buckets exist (a folder whose
	// first run stopped early may lack some).
	if services == nil {
		services = []string{}
	}
	o := app.Options{Services: services, Bus: localBus(), Store: e.Store, Instance: "local", Logger: slog.Default()}
	if len(services) > 0 {
		// The aggregator takes what the last process left in flight, as a run would.
		if o.Published, err = e.published(ctx); err != nil {
			e.Close()
			return nil, err
		}
	}
	if e.Running, err = app.Start(ctx, nc, o); err != nil {
		e.Close()
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, fmt.Errorf("open state %s: %w", dir, err)
	}
	e.close = append(e.close, e.Running.Close)
	return e, nil
}
