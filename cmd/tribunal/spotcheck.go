package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

func newSpotcheckCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, job, dimension string
	cmd := &cobra.Command{
		Use:   "spotcheck approve|reject --batch <id> --job <view job> [--dimension D]",
		Short: "Record the human spot-check (HE-2) of a rubric sign-off",
		Long: `In interactive mode the first sign-off of a run waits for a person: look at the signed-off view
next to its reference and verdict (results, or the console), then approve it, or reject it
naming the dimension the judge got wrong; the feature then ends DONE_WITH_CONCERNS and the
rubric can be tuned.`,
		Example: `  tribunal spotcheck approve --batch ui-20261130T080000-a1b2c3 --job tasks--list--populated--light
  tribunal spotcheck reject --batch ui-20261130T080000-a1b2c3 --job tasks--list--populated--light --dimension typography`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"approve", "reject"},
		RunE: func(cmd *cobra.Command, args []string) error {
			approved := args[0] == "approve"
			if !approved && args[0] != "reject" {
				return exitError{2, fmt.Errorf("want approve or reject, got %q", args[0])}
			}
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				rec, err := client.FindJob(cmd.Context(), b, tenant, batchID, job)
				if err != nil {
					return exitError{2, err}
				}
				rubric, err := client.ViewRubric(cmd.Context(), env.store, tenant, rec)
				if err != nil {
					return exitError{2, err}
				}
				if err := rubric.CheckSpotcheck(approved, dimension); err != nil {
					return exitError{2, fmt.Errorf("--dimension: %w", err)}
				}
				host, _ := os.Hostname()
				if err := client.Spotcheck(env.pub, tenant, batchID, job, approved, dimension, host); err != nil {
					return exitError{2, err}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "spot-check recorded for %s\n", job)
				return nil
			})
		},
	}
	conn.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(&batchID, "batch", "", "batch id")
	cmd.Flags().StringVar(&job, "job", "", "the view's job id (results show it)")
	cmd.Flags().StringVar(&dimension, "dimension", "", "reject: the rubric dimension the judge got wrong (one of the view's rubric)")
	_ = cmd.MarkFlagRequired("batch")
	_ = cmd.MarkFlagRequired("job")
	return cmd
}
