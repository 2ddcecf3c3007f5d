package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

func newRedriveCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, out string
	var asJSON, noWait bool
	cmd := &cobra.Command{
		Use:   "redrive --batch <id>",
		Short: "Send a completed batch's blocked jobs through again (after a provider or storage outage)",
		Long: `redrive finds the jobs of a completed batch that ended blocked (a judge provider that stayed
down, an event a service gave up on) and sends them through the pipeline again as a new
attempt. Jobs with any other outcome are not touched, the new outcomes replace the blocked
ones, and the batch completes again with new manifests. Then it prints the results.`,
		Example: `  tribunal redrive --batch nightly-20261130T080000-a1b2c3 --nats nats://127.0.0.1:4222`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				attempt, jobs, err := client.Redrive(cmd.Context(), b, env.pub, tenant, batchID)
				if err != nil {
					return err
				}
				if attempt == 0 {
					fmt.Fprintln(os.Stderr, "no blocked jobs to redrive")
					return showResults(cmd.Context(), env, tenant, batchID, out, asJSON, nil)
				}
				fmt.Fprintf(os.Stderr, "redrive attempt %d: %d blocked jobs sent again\n", attempt, len(jobs))
				if noWait {
					return nil
				}
				if _, err := client.WatchAttempt(cmd.Context(), b, tenant, batchID, attempt, 250*time.Millisecond); err != nil {
					return err
				}
				return showResults(cmd.Context(), env, tenant, batchID, out, asJSON, nil)
			})
		},
	}
	addResultFlags(cmd, &conn, nil, &tenant, &batchID, &out, &asJSON)
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the jobs are sent, without waiting for their outcomes")
	return cmd
}
