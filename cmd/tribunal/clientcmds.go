package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// clientEnv is a connection to running services with no service of its own. It never
// provisions anything: a team's user has no JetStream API rights, and submitting needs
// none (the stream acknowledges on the client's inbox).
type clientEnv struct {
	js    jetstream.JetStream
	pub   *bus.Publisher
	store blob.Store
	close func()
	// applied, set on a state folder opened with its aggregator (connectLocal), waits
	// until the aggregator has applied what was published; nil when services elsewhere
	// apply it in their own time.
	applied func(context.Context) error
}

func connectClient(ctx context.Context, conn *connFlags) (*clientEnv, error) {
	dir, err := conn.local.stateDir()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		return connectLocal(ctx, conn, dir)
	}
	nc, err := conn.connect()
	if err != nil {
		return nil, err
	}
	store, err := blob.OpenURL(ctx, conn.blobURL)
	if err != nil {
		nc.Close()
		return nil, exitError{2, err}
	}
	env, err := newClientEnv(nc, store)
	if err != nil {
		store.Close()
		nc.Close()
		return nil, err
	}
	env.close = func() { store.Close(); nc.Close() }
	return env, nil
}

// newClientEnv is a client over an open connection and store, which the caller closes.
func newClientEnv(nc *nats.Conn, store blob.Store) (*clientEnv, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &clientEnv{js: js, pub: bus.NewPublisher(js), store: store, close: func() {}}, nil
}

// connectState connects like connectClient and binds to the services' key-value state,
// for the commands that read or change batch state (services credentials only). The
// caller closes env.
func connectState(ctx context.Context, conn *connFlags) (*clientEnv, bus.Buckets, error) {
	env, err := connectClient(ctx, conn)
	if err != nil {
		return nil, bus.Buckets{}, err
	}
	b, err := env.buckets(ctx)
	if err != nil {
		env.close()
		return nil, b, err
	}
	return env, b, nil
}

// inState runs fn connected to the services' key-value state (connectState), and closes the
// connection when it returns: the preamble of every command that reads or changes a batch.
func inState(ctx context.Context, conn *connFlags, fn func(env *clientEnv, b bus.Buckets) error) error {
	env, b, err := connectState(ctx, conn)
	if err != nil {
		return err
	}
	defer env.close()
	return fn(env, b)
}

// buckets binds to the services' key-value state (services credentials only).
func (e *clientEnv) buckets(ctx context.Context) (bus.Buckets, error) {
	b, err := bus.OpenBuckets(ctx, e.js)
	if err != nil {
		return b, fmt.Errorf("read batch state (needs the services' NATS user): %w", err)
	}
	return b, nil
}

func newSubmitCmd() *cobra.Command {
	var conn connFlags
	var ing ingressFlags
	var sf spendFlags
	var tenant, resume string
	var allowOutside bool
	var acs []string
	var window int
	cmd := &cobra.Command{
		Use:   "submit <batch>",
		Short: "Submit a batch to running services and print its batch id",
		Long: `submit uploads a batch's artifacts and publishes its jobs to running services. The batch
id is the first line on stdout, printed before anything is uploaded or published, and the
only one: a submission that fails or is killed can always be named afterwards.

Every job's event is built and checked (its schema, its size against the bus's max
payload) before the first is published. An AC whose event cannot be published as it is
(a criterion too large, an invalid field) is submitted blocked with the reason, naming the
AC and the field, like any broken entry; a batch with a job that cannot be submitted even
blocked (an invalid or duplicate job id) is refused with nothing published (exit 2), as is
a batch naming a model it may not (--allowed-models; without it only the judge service's
own model, by leaving judges: empty) or an AC making more judge calls than
--max-calls-per-ac. Through --ingress the ingress's rules for the team apply instead.
A batch of more ACs (or jobs) than a batch may have is refused as soon as that is known.

A batch larger than --window ACs is checked, and then published, a window at a time:
planned, its files hashed, its jobs published and acknowledged, let go. It is planned
again as it is published; a file changed since it was checked stops the submission at
its AC, which is then incomplete (resume it once the file is restored, or cancel it).

--resume <id> finishes an interrupted submission of the same batch file under the same
id: it publishes what the services have not recorded. It refuses a batch file that
changed since (another job count or plan digest) and a cancelled batch. To end an
interrupted batch instead, use tribunal cancel.`,
		Example: `  id=$(tribunal submit examples/quickstart --nats nats://127.0.0.1:4222 --blob file:///srv/tribunal/blobs)
  tribunal watch --batch "$id" --nats nats://127.0.0.1:4222
  tribunal submit examples/quickstart --resume "$id" --nats nats://127.0.0.1:4222 --blob file:///srv/tribunal/blobs
  # a team, through the ingress, with nothing but its token:
  id=$(tribunal submit examples/quickstart --ingress https://tribunal.example.com --token-file team-a.token)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if resume != "" {
				if err := events.ValidateName(resume); err != nil {
					return exitError{2, fmt.Errorf("--resume: batch id %w", err)}
				}
			}
			b, err := batch.Load(args[0])
			if err != nil {
				return exitError{2, err}
			}
			if len(acs) > 0 {
				if err := b.Select(acs, parted(b)); err != nil {
					return exitError{2, err}
				}
			}
			for _, r := range b.Rejected {
				fmt.Fprintln(os.Stderr, "skipped:", r)
			}
			if window <= 0 {
				return exitError{2, fmt.Errorf("--window must be positive")}
			}
			sub := &client.Submitter{AllowOutside: allowOutside, Window: window}
			tenant = cmp.Or(tenant, b.Tenant, "default")
			// bk is the batch state a resume compares with; a team through the ingress has none.
			var bk *bus.Buckets
			if c, err := ing.dial(cmd.Context()); err != nil {
				return err
			} else if c != nil {
				// A team through the ingress: the same submission, over HTTP.
				if tenant, err = ingressTenant(cmd, c, tenant); err != nil {
					return err
				}
				sub.Pub, sub.Store = c, c
			} else {
				env, err := connectClient(cmd.Context(), &conn)
				if err != nil {
					return err
				}
				defer env.close()
				sub.Pub, sub.Store = env.pub, env.store
				// A direct submission is checked here, before anything is published, with
				// the rules the judge service applies anyway.
				if sub.Spend, err = sf.allowance(tenant, ""); err != nil {
					return exitError{2, err}
				}
				if resume != "" {
					b, err := env.buckets(cmd.Context())
					if err != nil {
						return exitError{2, fmt.Errorf("--resume: %w", err)}
					}
					bk = &b
				}
			}
			id := resume
			if id == "" {
				id = client.NewBatchID(b)
			}
			// The id first, before anything is uploaded or published: whatever happens next,
			// the batch can be named to resume or cancel it.
			fmt.Fprintln(cmd.OutOrStdout(), id)
			var s client.Submission
			if resume != "" {
				if bk == nil {
					return exitError{2, errors.New("--resume reads the batch's state: it needs the services' NATS user, not --ingress")}
				}
				s, err = sub.Resume(cmd.Context(), *bk, b, tenant, id)
				if err == nil {
					fmt.Fprintf(os.Stderr, "batch %s: %d jobs, %d recorded already, %d published now\n", id, s.Jobs, s.Recorded, s.Published)
				}
			} else {
				s, err = sub.Submit(cmd.Context(), b, tenant, id)
			}
			for _, p := range s.Blocked {
				fmt.Fprintln(os.Stderr, "blocked:", p)
			}
			var refused *client.RefusedError
			switch {
			case errors.As(err, &refused):
				return exitError{2, err}
			case err != nil:
				return exitError{2, fmt.Errorf("%w\nbatch %s is incomplete: finish it with `tribunal submit %s --resume %s` (same flags), or end it with `tribunal cancel %s`",
					err, id, args[0], id, id)}
			}
			return nil
		},
	}
	conn.register(cmd.Flags())
	ing.register(cmd.Flags())
	sf.register(cmd.Flags(), true)
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant (team); default the batch's, else \"default\" (through --ingress: the token's)")
	cmd.Flags().BoolVar(&allowOutside, "allow-outside", false, "allow artifact paths outside the batch folder")
	cmd.Flags().IntVar(&window, "window", client.DefaultWindow, "ACs planned, checked and published at a time: a submission holds a window's plans, not the batch's (the batch is still checked whole before anything is published)")
	cmd.Flags().StringSliceVar(&acs, "ac", nil, "submit only these ACs of the batch (comma-separated ids, as cfn-ab-critic's --ac)")
	cmd.Flags().StringVar(&resume, "resume", "", "finish the interrupted submission of this batch id (the same batch file): publish what the services have not recorded")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var conn connFlags
	var tenant, by string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "cancel <batch>",
		Short: "End a batch: every AC without an outcome is blocked as cancelled",
		Long: `cancel ends a batch that is running, or that an interrupted submission left incomplete:
every AC without an outcome, including ACs that were never submitted, is blocked with
stage "cancel" and reason "cancelled by <who>", ACs with an outcome keep it, and the batch
completes once, with its manifests. It waits for the completion unless --no-wait.

With a team's NATS user (which cannot read the batch state) the cancel is only sent.`,
		Example: `  tribunal cancel nightly-20261130T080000-a1b2c3 --tenant team-a --nats nats://127.0.0.1:4222`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			batchID := args[0]
			env, err := connectClient(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			bk, err := env.buckets(cmd.Context())
			if err != nil {
				slog.Debug("batch state unreadable", "err", err)
				if err := client.CancelRequest(env.pub, tenant, batchID, by); err != nil {
					return exitError{2, err}
				}
				fmt.Fprintf(os.Stderr, "cancel of %s requested; this NATS user cannot read the batch state, so it is not followed\n", batchID)
				return nil
			}
			h, err := client.Cancel(cmd.Context(), bk, env.pub, tenant, batchID, by)
			if err != nil {
				return exitError{2, err}
			}
			fmt.Fprintf(os.Stderr, "cancel of %s requested by %s (%d jobs)\n", batchID, by, h.Size)
			if noWait {
				return nil
			}
			c, err := client.Watch(cmd.Context(), bk, tenant, batchID, 250*time.Millisecond, func(client.Progress) {})
			if err != nil {
				return err
			}
			sum := c.Summary
			fmt.Fprintf(os.Stderr, "batch %s complete: %s, %d compared, %d blocked; tribunal results --batch %s shows them\n", batchID, plural(sum.Total, "AC"), sum.Compared, sum.Blocked, batchID)
			return nil
		},
	}
	conn.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(&by, "by", defaultBy(), "who cancels: every AC it blocks gets the reason \"cancelled by <by>\"")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the cancel is sent, without waiting for the batch to complete")
	return cmd
}

// defaultBy names the person cancelling: their login on this host.
func defaultBy() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "":
		return cmp.Or(host, "unknown")
	case host == "":
		return name
	}
	return name + "@" + host
}

func newWatchCmd() *cobra.Command {
	var conn connFlags
	var ing ingressFlags
	var tenant, batchID, out string
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:     "watch --batch <id>",
		Short:   "Follow a submitted batch until it completes, then print its results",
		Example: `  tribunal watch --batch quickstart-20261130T080000-a1b2c3 --tenant default`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := newProgress(os.Stderr, quiet || asJSON)
			c, err := ing.dialAs(cmd, tenant)
			if err != nil {
				return err
			}
			if c != nil {
				if _, err := client.Poll(cmd.Context(), 250*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, batchID) }, p.report); err != nil {
					return err
				}
				res, err := c.Results(cmd.Context(), batchID)
				if err != nil {
					return err
				}
				return printLoaded(res, out, asJSON, nil)
			}
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				if _, err := client.Watch(cmd.Context(), b, tenant, batchID, 250*time.Millisecond, p.report); err != nil {
					return err
				}
				return showResults(cmd.Context(), env, tenant, batchID, out, asJSON, nil)
			})
		},
	}
	addResultFlags(cmd, &conn, &ing, &tenant, &batchID, &out, &asJSON)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	return cmd
}

func newResultsCmd() *cobra.Command {
	var conn connFlags
	var ing ingressFlags
	var tenant, batchID, out string
	var asJSON, cfn bool
	var ci ciFlags
	cmd := &cobra.Command{
		Use:     "results --batch <id>",
		Short:   "Print (and write) the results of a completed batch",
		Example: `  tribunal results --batch quickstart-20261130T080000-a1b2c3 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ci.check(); err != nil {
				return exitError{2, err}
			}
			c, err := ing.dialAs(cmd, tenant)
			if err != nil {
				return err
			}
			if c != nil {
				res, err := c.Results(cmd.Context(), batchID)
				if err != nil {
					return err
				}
				if cfn {
					if err := writeCFN(res); err != nil {
						return err
					}
				}
				return printLoaded(res, out, asJSON, &ci)
			}
			env, err := connectClient(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			if !cmd.Flags().Changed("tenant") {
				// The state knows whose the batch is.
				tenant = ""
			}
			if cfn {
				b, err := env.buckets(cmd.Context())
				if err != nil {
					return err
				}
				if tenant, err = client.ResolveTenant(cmd.Context(), b, tenant, batchID); err != nil {
					return exitError{2, err}
				}
				res, err := client.Load(cmd.Context(), b, env.store, tenant, batchID)
				if err != nil {
					return err
				}
				if err := writeCFN(res); err != nil {
					return err
				}
			}
			return showResults(cmd.Context(), env, tenant, batchID, out, asJSON, &ci)
		},
	}
	addResultFlags(cmd, &conn, &ing, &tenant, &batchID, &out, &asJSON)
	conn.registerLocal(cmd.Flags(), "results")
	cmd.Flags().BoolVar(&cfn, "cfn", false, cfnFlagHelp)
	ci.register(cmd.Flags())
	return cmd
}

func addResultFlags(cmd *cobra.Command, conn *connFlags, ing *ingressFlags, tenant, batchID, out *string, asJSON *bool) {
	conn.register(cmd.Flags())
	if ing != nil {
		ing.register(cmd.Flags())
	}
	cmd.Flags().StringVar(tenant, "tenant", "default", "tenant (team) the batch belongs to (results: default the one whose state holds the batch)")
	cmd.Flags().StringVar(batchID, "batch", "", "batch id printed by submit")
	cmd.Flags().StringVarP(out, "out", "o", "", "also write results.json and manifest.json under this folder")
	cmd.Flags().BoolVar(asJSON, "json", false, "print the results as JSON")
	_ = cmd.MarkFlagRequired("batch")
}

func showResults(ctx context.Context, env *clientEnv, tenant, batchID, out string, asJSON bool, ci *ciFlags) error {
	b, err := env.buckets(ctx)
	if err != nil {
		return err
	}
	// A read the cluster does not answer for the moment (a member slowed or cut off, an
	// election) is tried again: the batch is complete, and its results are worth the wait.
	notify := func(err error, next time.Duration) {
		fmt.Fprintf(os.Stderr, "tribunal: results not read yet (%v); trying again in %s\n", err, next.Round(time.Millisecond))
	}
	res, err := client.Retrying(ctx, client.ReadBound, notify, func(ctx context.Context) (*client.Results, error) {
		// No tenant named (""): the one whose state holds the batch.
		t, err := client.ResolveTenant(ctx, b, tenant, batchID)
		if err != nil {
			if bus.IsTransient(err) {
				return nil, err
			}
			return nil, exitError{2, err}
		}
		return client.Load(ctx, b, env.store, t, batchID)
	})
	if err != nil {
		return err
	}
	return printLoaded(res, out, asJSON, ci)
}

// printLoaded prints (and, with out, writes) loaded results, and the CI outputs ci asks
// for (nil: none); a batch with findings exits with its code, or the code ci's policy
// gives.
func printLoaded(res *client.Results, out string, asJSON bool, ci *ciFlags) error {
	var err error
	dir := ""
	if out != "" {
		if dir, err = res.Write(out); err != nil {
			return err
		}
	}
	if err := printResults(os.Stdout, res, dir, asJSON); err != nil {
		return err
	}
	if ci != nil {
		// The batch file, when it is still where the batch was submitted from, names the
		// ACs' artifacts for annotations on them.
		var b *batch.Batch
		if res.Source != "" {
			b, _ = batch.Load(res.Source)
		}
		if err := ci.write(annotationsTo(asJSON), res, b); err != nil {
			return err
		}
	}
	if code := ci.exitCode(res); code != 0 {
		return exitError{code: code}
	}
	return nil
}
