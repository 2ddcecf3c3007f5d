package commands

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func newViewResetCmd(env stage.CommandEnv) *cobra.Command {
	var open stage.OpenState
	var tenant, batchID, job, reason string
	cmd := &cobra.Command{
		Use:   "view-reset --batch <id> --job <view job> [--reason R]",
		Short: "Start a new loop of a rubric view (the way out of a spent iteration budget)",
		Long: `A rubric view's loop keeps its iterations, attempts, frozen dimensions and budget across
runs. A view that spent its budget stays BLOCKED until its loop starts again: either because
its spec.json, spec.md, tokens, contrast pairs, rubric or reference changed (the next run
starts a new loop by itself), or because an operator resets it here. The reset is an event
on the stream (view.reset), so the audit replays it; it names a job of the view (results
show it) and takes effect at the view's next run.

After tribunal run, it works on the state folder run keeps, with no server: when neither
--nats nor --blob names one, it opens .tribunal (or --data-dir) as tribunal view does,
waiting while a run holds the folder, and runs the aggregator there until the reset is
applied. The next tribunal run then starts the view's next loop at iteration 1. Against
running services (--nats) the reset is sent, and the aggregator applies it in its own time.`,
		Example: `  tribunal view-reset --batch ui-20261130T080000-a1b2c3 --job tasks--list--populated--light \
    --reason "typography froze on a rubric bug, fixed in rubric.json"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return open(cmd.Context(), func(st stage.CommandState) error {
				host, _ := os.Hostname()
				loop, err := ResetView(cmd.Context(), st.Buckets, st.Pub, tenant, batchID, job, host, reason)
				if err != nil {
					return cli.Exit(2, err)
				}
				if st.Applied == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "reset of loop %d of %s sent: the view's next run starts loop %d\n", loop, job, loop+1)
					return nil
				}
				if err := resetApplied(cmd.Context(), st, tenant, batchID, job, loop); err != nil {
					return cli.Exit(2, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reset of loop %d of %s recorded: the view's next run starts loop %d at iteration 1\n", loop, job, loop+1)
				return nil
			})
		},
	}
	open = env.StateFlags(cmd.Flags(), "view-reset")
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(&batchID, "batch", "", "batch id of a run of the view")
	cmd.Flags().StringVar(&job, "job", "", "the view's job id in that batch (results show it)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the loop starts again (kept on the view and shown in the console)")
	_ = cmd.MarkFlagRequired("batch")
	_ = cmd.MarkFlagRequired("job")
	return cmd
}

// resetApplied waits for the state folder's aggregator and checks that it ended loop:
// the view's record is past it.
// The aggregator can read as idle between the reset's delivery and the view's write (CI
// caught it once under load), so the view is looked at again, within resetApplyWait,
// until it is past loop.
func resetApplied(ctx context.Context, st stage.CommandState, tenant, batchID, job string, loop int) error {
	rec, err := records.FindJob(ctx, st.Buckets, tenant, batchID, job)
	if err != nil {
		return err
	}
	lk, _ := kind.LoopingOf(rec.Spec.Kind)
	deadline := time.Now().Add(resetApplyWait)
	for {
		if err := st.Applied(ctx); err != nil {
			return fmt.Errorf("reset of loop %d of %s: %w", loop, job, err)
		}
		v, _, err := views.Load(ctx, st.Buckets.Views, lk.StateKey(tenant, rec.Spec))
		if err != nil {
			return err
		}
		if v.Generation > loop {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reset of loop %d of %s: the aggregator did not apply it (the view is still in loop %d); its log says why", loop, job, v.Generation)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// resetApplyWait bounds how long an idle aggregator may take to show the reset.
const resetApplyWait = 10 * time.Second
