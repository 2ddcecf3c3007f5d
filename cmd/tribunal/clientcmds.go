package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

// clientEnv is a connection to running services with no service of its own. It never
// provisions anything: a team's user has no JetStream API rights, and submitting needs
// none (the stream acknowledges on the client's inbox).
type clientEnv struct {
	js    jetstream.JetStream
	pub   *bus.Publisher
	store blob.Store
	close func()
}

func connectClient(ctx context.Context, conn *connFlags) (*clientEnv, error) {
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
	var tenant string
	var allowOutside bool
	var acs []string
	cmd := &cobra.Command{
		Use:   "submit <batch>",
		Short: "Submit a batch to running services and print its batch id",
		Example: `  id=$(tribunal submit examples/quickstart --nats nats://127.0.0.1:4222 --blob file:///srv/tribunal/blobs)
  tribunal watch --batch "$id" --nats nats://127.0.0.1:4222
  # a team, through the ingress, with nothing but its token:
  id=$(tribunal submit examples/quickstart --ingress https://tribunal.example.com --token-file team-a.token)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := batch.Load(args[0])
			if err != nil {
				return exitError{2, err}
			}
			if len(acs) > 0 {
				if err := b.Select(acs); err != nil {
					return exitError{2, err}
				}
			}
			for _, r := range b.Rejected {
				fmt.Fprintln(os.Stderr, "skipped:", r)
			}
			sub := &client.Submitter{AllowOutside: allowOutside}
			tenant = firstNonEmpty(tenant, b.Tenant, "default")
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
			}
			s, err := sub.Submit(cmd.Context(), b, tenant, client.NewBatchID(b))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.BatchID)
			return nil
		},
	}
	conn.register(cmd.Flags())
	ing.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant (team); default the batch's, else \"default\" (through --ingress: the token's)")
	cmd.Flags().BoolVar(&allowOutside, "allow-outside", false, "allow artifact paths outside the batch folder")
	cmd.Flags().StringSliceVar(&acs, "ac", nil, "submit only these ACs of the batch (comma-separated ids, as cfn-ab-critic's --ac)")
	return cmd
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
			if c, err := ing.dial(cmd.Context()); c != nil || err != nil {
				if err != nil {
					return err
				}
				if _, err := ingressTenant(cmd, c, tenant); err != nil {
					return err
				}
				if _, err := client.Poll(cmd.Context(), 250*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, batchID) }, p.report); err != nil {
					return err
				}
				res, err := c.Results(cmd.Context(), batchID)
				if err != nil {
					return err
				}
				return printLoaded(res, out, asJSON)
			}
			env, err := connectClient(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			b, err := env.buckets(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := client.Watch(cmd.Context(), b, tenant, batchID, 250*time.Millisecond, p.report); err != nil {
				return err
			}
			return showResults(cmd.Context(), env, tenant, batchID, out, asJSON)
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
	cmd := &cobra.Command{
		Use:     "results --batch <id>",
		Short:   "Print (and write) the results of a completed batch",
		Example: `  tribunal results --batch quickstart-20261130T080000-a1b2c3 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c, err := ing.dial(cmd.Context()); c != nil || err != nil {
				if err != nil {
					return err
				}
				if _, err := ingressTenant(cmd, c, tenant); err != nil {
					return err
				}
				res, err := c.Results(cmd.Context(), batchID)
				if err != nil {
					return err
				}
				if cfn {
					if err := writeCFN(res); err != nil {
						return err
					}
				}
				return printLoaded(res, out, asJSON)
			}
			env, err := connectClient(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			if cfn {
				b, err := env.buckets(cmd.Context())
				if err != nil {
					return err
				}
				res, err := client.Load(cmd.Context(), b, env.store, tenant, batchID)
				if err != nil {
					return err
				}
				if err := writeCFN(res); err != nil {
					return err
				}
			}
			return showResults(cmd.Context(), env, tenant, batchID, out, asJSON)
		},
	}
	addResultFlags(cmd, &conn, &ing, &tenant, &batchID, &out, &asJSON)
	cmd.Flags().BoolVar(&cfn, "cfn", false, "also write the ab manifest where the cfn-ab-critic vote step looks for it: ./.cfn-cache/manifests/cfn-ab-critic-<ns>.json")
	return cmd
}

func addResultFlags(cmd *cobra.Command, conn *connFlags, ing *ingressFlags, tenant, batchID, out *string, asJSON *bool) {
	conn.register(cmd.Flags())
	if ing != nil {
		ing.register(cmd.Flags())
	}
	cmd.Flags().StringVar(tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(batchID, "batch", "", "batch id printed by submit")
	cmd.Flags().StringVarP(out, "out", "o", "", "also write results.json and manifest.json under this folder")
	cmd.Flags().BoolVar(asJSON, "json", false, "print the results as JSON")
	_ = cmd.MarkFlagRequired("batch")
}

func showResults(ctx context.Context, env *clientEnv, tenant, batchID, out string, asJSON bool) error {
	b, err := env.buckets(ctx)
	if err != nil {
		return err
	}
	res, err := client.Load(ctx, b, env.store, tenant, batchID)
	if err != nil {
		return err
	}
	return printLoaded(res, out, asJSON)
}

// printLoaded prints (and, with out, writes) loaded results; a batch with findings
// exits with its code.
func printLoaded(res *client.Results, out string, asJSON bool) error {
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
	if res.Summary.ExitCode != 0 {
		return exitError{code: res.Summary.ExitCode}
	}
	return nil
}
