package commands

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func newSpotcheckCmd(env stage.CommandEnv) *cobra.Command {
	var open stage.OpenState
	var tenant, batchID, job, dimension string
	cmd := &cobra.Command{
		Use:   "spotcheck approve|reject --batch <id> --job <view job> [--dimension D]",
		Short: "Record the human spot-check (HE-2) of a rubric sign-off",
		Long: `In interactive mode the first sign-off of a run waits for a person: look at the signed-off view
next to its reference and verdict (results, or the console), then approve it, or reject it
naming the dimension the judge got wrong; the feature then ends DONE_WITH_CONCERNS and the
rubric can be tuned.

After tribunal run, it works on the state folder run keeps, with no server: when neither
--nats nor --blob names one, it opens .tribunal (or --data-dir) as tribunal view does,
waiting while a run holds the folder, and runs the aggregator there until the spot-check
is recorded on the sign-off (a run stopped at the HE-2 question leaves its sign-off
waiting there). Against running services (--nats) the spot-check is sent, and the
aggregator records it in its own time.`,
		Example: `  tribunal spotcheck approve --batch ui-20261130T080000-a1b2c3 --job tasks--list--populated--light
  tribunal spotcheck reject --batch ui-20261130T080000-a1b2c3 --job tasks--list--populated--light --dimension typography`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"approve", "reject"},
		RunE: func(cmd *cobra.Command, args []string) error {
			approved := args[0] == "approve"
			if !approved && args[0] != "reject" {
				return cli.Exit(2, fmt.Errorf("want approve or reject, got %q", args[0]))
			}
			return open(cmd.Context(), func(st stage.CommandState) error {
				rec, err := records.FindJob(cmd.Context(), st.Buckets, tenant, batchID, job)
				if err != nil {
					return cli.Exit(2, err)
				}
				if rec.Status != events.StatusAwaitingSpotcheck {
					// The rules take a spot-check only while a sign-off waits for one; any
					// other would be dropped without a word.
					return cli.Exit(2, fmt.Errorf("job %s of batch %s is not a sign-off waiting for a spot-check: its status is %s", job, batchID, rec.Status))
				}
				rubric, err := ViewRubric(cmd.Context(), st.Store, tenant, rec)
				if err != nil {
					return cli.Exit(2, err)
				}
				if err := rubric.CheckSpotcheck(approved, dimension); err != nil {
					return cli.Exit(2, fmt.Errorf("--dimension: %w", err))
				}
				host, _ := os.Hostname()
				if err := Spotcheck(st.Pub, tenant, batchID, job, approved, dimension, host); err != nil {
					return cli.Exit(2, err)
				}
				if st.Applied == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "spot-check sent for %s\n", job)
					return nil
				}
				value, err := spotcheckApplied(cmd.Context(), st, tenant, batchID, job)
				if err != nil {
					return cli.Exit(2, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "spot-check recorded for %s: human_spotcheck %s\n", job, value)
				return nil
			})
		},
	}
	open = env.StateFlags(cmd.Flags(), "spotcheck")
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(&batchID, "batch", "", "batch id")
	cmd.Flags().StringVar(&job, "job", "", "the view's job id (results show it)")
	cmd.Flags().StringVar(&dimension, "dimension", "", "reject: the rubric dimension the judge got wrong (one of the view's rubric)")
	_ = cmd.MarkFlagRequired("batch")
	_ = cmd.MarkFlagRequired("job")
	return cmd
}

// spotcheckApplied waits for the state folder's aggregator and returns the sign-off's
// human_spotcheck as recorded, or why the spot-check was not. Like resetApplied, it looks
// again within resetApplyWait: the aggregator can read as idle before the record shows.
func spotcheckApplied(ctx context.Context, st stage.CommandState, tenant, batchID, job string) (string, error) {
	deadline := time.Now().Add(resetApplyWait)
	for {
		if err := st.Applied(ctx); err != nil {
			return "", fmt.Errorf("spot-check of %s: %w", job, err)
		}
		rec, err := records.FindJob(ctx, st.Buckets, tenant, batchID, job)
		if err != nil {
			return "", err
		}
		vs, err := rubric.StateOf(rec)
		if err != nil {
			return "", fmt.Errorf("spot-check of %s: %w", job, err)
		}
		if rec.Status != events.StatusAwaitingSpotcheck && vs != nil && vs.SignOff != nil {
			return vs.SignOff.HumanSpotcheck, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("spot-check of %s: the aggregator did not record it (status %s); its log says why", job, rec.Status)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
