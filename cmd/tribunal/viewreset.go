package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

func newViewResetCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, job, reason string
	cmd := &cobra.Command{
		Use:   "view-reset --batch <id> --job <view job> [--reason R]",
		Short: "Start a new loop of a rubric view (the way out of a spent iteration budget)",
		Long: `A rubric view's loop keeps its iterations, attempts, frozen dimensions and budget across
runs. A view that spent its budget stays BLOCKED until its loop starts again: either because
its spec.json, spec.md, tokens, contrast pairs, rubric or reference changed (the next run
starts a new loop by itself), or because an operator resets it here. The reset is an event
on the stream (view.reset), so the audit replays it; it names a job of the view (results
show it) and takes effect at the view's next run.`,
		Example: `  tribunal view-reset --batch ui-20261130T080000-a1b2c3 --job tasks--list--populated--light \
    --reason "typography froze on a rubric bug, fixed in rubric.json"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				host, _ := os.Hostname()
				loop, err := client.ResetView(cmd.Context(), b, env.pub, tenant, batchID, job, host, reason)
				if err != nil {
					return exitError{2, err}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reset of loop %d of %s sent: the view's next run starts loop %d\n", loop, job, loop+1)
				return nil
			})
		},
	}
	conn.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(&batchID, "batch", "", "batch id of a run of the view")
	cmd.Flags().StringVar(&job, "job", "", "the view's job id in that batch (results show it)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the loop starts again (kept on the view and shown in the console)")
	_ = cmd.MarkFlagRequired("batch")
	_ = cmd.MarkFlagRequired("job")
	return cmd
}
