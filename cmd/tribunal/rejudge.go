package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
)

func newRejudgeCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, model string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rejudge --batch <id> --model <model>",
		Short: "Judge a completed batch again with another model, reusing its stored renders and gates",
		Long: `rejudge publishes every job's stored judge-facing event again for another model: nothing is
rendered or gated again, and the judges see exactly the blinded slots, transcripts or
renders the first judge saw. The new verdicts are recorded in the stream next to the old
ones (an audit counts them) and never change a decision; rejudge derives each with the
aggregator's rules and prints it next to the recorded outcome.`,
		Example: `  tribunal rejudge --batch nightly-20261130T080000-a1b2c3 --model gpt-4o --nats nats://127.0.0.1:4222`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				n, err := client.Rejudge(cmd.Context(), env.js, env.pub, tenant, batchID, model)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "rejudging %d jobs with %s\n", n, model)
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				rows, err := client.RejudgeResults(ctx, env.js, b, tenant, batchID, model, n)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(os.Stdout, rows)
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "AC\tKIND\tRECORDED\tREJUDGED\tJUDGE\tAGREE")
				agree := 0
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", r.ACID, r.Kind, r.Original, r.Rejudged, r.Judge, r.Agree)
					if r.Agree {
						agree++
					}
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Printf("\n%d of %d jobs agree with the recorded outcome\n", agree, len(rows))
				return nil
			})
		},
	}
	conn.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to")
	cmd.Flags().StringVar(&batchID, "batch", "", "batch id")
	cmd.Flags().StringVar(&model, "model", "", "the judge model to ask")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up waiting for the verdicts after this long")
	_ = cmd.MarkFlagRequired("batch")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}
