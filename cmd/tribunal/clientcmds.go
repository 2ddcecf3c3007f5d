package main

import (
	"context"
	"fmt"
	"os"
	"time"

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
	js, err := jetstream.New(nc)
	if err != nil {
		store.Close()
		nc.Close()
		return nil, err
	}
	return &clientEnv{js: js, pub: bus.NewPublisher(js), store: store, close: func() { store.Close(); nc.Close() }}, nil
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
	var tenant string
	var allowOutside bool
	var acs []string
	cmd := &cobra.Command{
		Use:   "submit <batch>",
		Short: "Submit a batch to running services and print its batch id",
		Example: `  id=$(tribunal submit examples/quickstart --nats nats://127.0.0.1:4222 --blob file:///srv/tribunal/blobs)
  tribunal watch --batch "$id" --nats nats://127.0.0.1:4222`,
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
			env, err := connectClient(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			sub := &client.Submitter{Pub: env.pub, Store: env.store, AllowOutside: allowOutside}
			s, err := sub.Submit(cmd.Context(), b, firstNonEmpty(tenant, b.Tenant, "default"), client.NewBatchID(b))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.BatchID)
			return nil
		},
	}
	conn.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant (team); default the batch's, else \"default\"")
	cmd.Flags().BoolVar(&allowOutside, "allow-outside", false, "allow artifact paths outside the batch folder")
	cmd.Flags().StringSliceVar(&acs, "ac", nil, "submit only these ACs of the batch (comma-separated ids, as cfn-ab-critic's --ac)")
	return cmd
}

func newWatchCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, out string
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:     "watch --batch <id>",
		Short:   "Follow a submitted batch until it completes, then print its results",
		Example: `  tribunal watch --batch quickstart-20261130T080000-a1b2c3 --tenant default`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, b, err := connectState(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			p := newProgress(os.Stderr, quiet || asJSON)
			if _, err := client.Watch(cmd.Context(), b, tenant, batchID, 250*time.Millisecond, p.report); err != nil {
				return err
			}
			return showResults(cmd.Context(), env, tenant, batchID, out, asJSON)
		},
	}
	addResultFlags(cmd, &conn, &tenant, &batchID, &out, &asJSON)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	return cmd
}

func newResultsCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, out string
	var asJSON, cfn bool
	cmd := &cobra.Command{
		Use:     "results --batch <id>",
		Short:   "Print (and write) the results of a completed batch",
		Example: `  tribunal results --batch quickstart-20261130T080000-a1b2c3 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	addResultFlags(cmd, &conn, &tenant, &batchID, &out, &asJSON)
	cmd.Flags().BoolVar(&cfn, "cfn", false, "also write the ab manifest where the cfn-ab-critic vote step looks for it: ./.cfn-cache/manifests/cfn-ab-critic-<ns>.json")
	return cmd
}

func addResultFlags(cmd *cobra.Command, conn *connFlags, tenant, batchID, out *string, asJSON *bool) {
	conn.register(cmd.Flags())
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
