package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

func newValidateCmd() *cobra.Command {
	var tenant, provider, model string
	var asJSON, allowOutside, forServices bool
	var prices priceFlags
	cmd := &cobra.Command{
		Use:   "validate <batch>",
		Short: "Check a batch and print what judging it would do, without running anything",
		Long: `validate parses the batch, resolves and classifies every artifact as the renderer would
(what would be judged, what would be blocked and why) and prints the plan: per AC its kind,
its artifacts and their class, its judges and the model calls it would cost. It starts no
NATS server and calls no model; the artifacts are read into a temporary folder that is
removed afterwards.

It exits 0 when every AC would be judged, and 2 listing every problem: entries that would
be skipped and ACs that would be blocked.`,
		Example: `  tribunal validate examples/quickstart
  tribunal validate batch.yaml --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := batch.Load(args[0])
			if err != nil {
				return exitError{2, err}
			}
			return showPlan(cmd.Context(), cmd.OutOrStdout(), b, cmp.Or(tenant, b.Tenant, "default"), allowOutside, forServices, asJSON, &prices, provider, model,
				// No deployment is known: a batch's judge_mode: batch is priced as granted.
				batchmode.Policy{AllowBatch: true})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant (team) to check as; default the batch's, else \"default\"")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&allowOutside, "allow-outside", false, "allow artifact paths outside the batch folder")
	cmd.Flags().StringVar(&provider, "judge", "scripted", "the judge provider the estimate prices calls for (scripted asks no model)")
	cmd.Flags().StringVar(&model, "judge-model", "", "the model the estimate prices calls at (an ab panel's models price their own)")
	prices.register(cmd.Flags())
	cmd.Flags().BoolVar(&forServices, "services", false, "check as `tribunal submit` to running services would: a rubric route must then be a URL a renderer can reach")
	return cmd
}

// showPlan plans b as validate does (its artifacts read into a temporary store, nothing
// published), prices the estimate and prints it; it exits 2 when an AC would not be
// judged. `run --dry-run` shows the same plan for the run's judge. modes decides whether
// the judge calls go through the provider's batch API, priced at its discount.
func showPlan(ctx context.Context, w io.Writer, b *batch.Batch, tenant string, allowOutside, forServices, asJSON bool, pf *priceFlags, provider, model string, modes batchmode.Policy) error {
	tmp, err := os.MkdirTemp("", "tribunal-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	store, err := fileblob.New(tmp, fileblob.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer store.Close()
	sub := &client.Submitter{Store: store, AllowOutside: allowOutside}
	if !forServices {
		// As `tribunal run` does, which serves a feature folder's pages itself.
		sub.ServeFeature = func(string) (string, error) { return "http://127.0.0.1/", nil }
	}
	plan, err := sub.PlanBatch(ctx, b, tenant)
	if err != nil {
		return exitError{2, err}
	}
	mode, _ := modes.Mode(b.JudgeMode, provider == "openai")
	if err := priceEstimate(plan, pf, provider, model, mode == events.JudgeModeBatch); err != nil {
		return exitError{2, err}
	}
	if asJSON {
		if err := writeJSON(w, plan); err != nil {
			return err
		}
	} else if err := printPlan(w, plan); err != nil {
		return err
	}
	if len(plan.Problems) > 0 {
		return exitError{code: 2}
	}
	return nil
}

// priceEstimate prices a plan's token estimate for the judge provider and model at the
// flags' prices, at the batch discount when batchAPI. The scripted judge's calls cost 0,
// saying why (price.RecordedReason).
func priceEstimate(p *client.Plan, pf *priceFlags, provider, model string, batchAPI bool) error {
	table, err := pf.tableOf()
	if err != nil {
		return err
	}
	p.Price(table, provider, model, batchAPI)
	return nil
}

// printPlan writes a plan as a table of ACs and their artifacts, the problems and the
// cost.
func printPlan(w io.Writer, p *client.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AC\tKIND\tARTIFACT\tCLASS\tJUDGES\tCALLS\tBLOCKED")
	for _, ac := range p.ACs {
		judges := "-"
		if k, err := kind.Lookup(events.Kind(ac.Kind)); err == nil {
			if s, ok := k.(kind.Summarizing); ok {
				judges = s.JudgesSummary(ac.Jobs, kind.Estimate{Judges: ac.Judges, Positions: ac.Positions, Cases: ac.Cases})
			}
		}
		calls := fmt.Sprint(ac.JudgeCalls)
		if ac.MaxJudgeCalls > ac.JudgeCalls {
			calls += fmt.Sprintf("-%d", ac.MaxJudgeCalls)
		}
		if ac.RunnerCalls > 0 {
			calls += fmt.Sprintf(" + %d runner", ac.RunnerCalls)
		}
		first := "-\t-"
		if len(ac.Artifacts) > 0 {
			first = artifactCells(ac.Artifacts[0])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ac.ID, ac.Kind, first, judges, calls, dash(clip(ac.Blocked, 72)))
		for _, a := range ac.Artifacts[min(1, len(ac.Artifacts)):] {
			fmt.Fprintf(tw, "\t\t%s\t\t\t\n", artifactCells(a))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nbatch %s: %s, %s; it would cost %s", p.Batch, plural(len(p.ACs), "AC"), plural(p.Jobs, "job"), plural(p.JudgeCalls, "judge call"))
	if p.MaxJudgeCalls > p.JudgeCalls {
		fmt.Fprintf(w, " (up to %d as rubric views loop, auto positions swap and ladders escalate)", p.MaxJudgeCalls)
	}
	if p.RunnerCalls > 0 {
		fmt.Fprintf(w, " and %s", plural(p.RunnerCalls, "runner call"))
	}
	fmt.Fprintln(w, ", before cache hits, repair re-asks and retries")
	fmt.Fprintf(w, "about %d prompt and %d completion tokens", p.PromptTokens, p.CompletionTokens)
	switch {
	case p.Cost == nil:
		fmt.Fprintln(w)
	case p.Cost.Priced == 0 && p.Cost.Unpriced == 0:
		fmt.Fprintln(w, ", costing nothing")
	default:
		fmt.Fprintf(w, ", about %s at prices %s", p.Cost, p.PriceTable)
		if p.BatchAPI {
			fmt.Fprint(w, ", the judge calls at the provider's batch discount (judge_mode: batch)")
		}
		fmt.Fprintln(w, " (a rough estimate: a budget's reservation is the bound)")
		if m := p.MaxCost; m != nil && (*m != *p.Cost) {
			fmt.Fprintf(w, "at most about %d prompt and %d completion tokens, about %s, %s\n", p.MaxPromptTokens, p.MaxCompletionTokens, m, worstCase(p))
		}
	}
	if len(p.Problems) == 0 {
		fmt.Fprintln(w, "no problems: every AC would be judged")
		return nil
	}
	fmt.Fprintf(w, "%s:\n", plural(len(p.Problems), "problem"))
	for _, pr := range p.Problems {
		fmt.Fprintln(w, "  "+pr)
	}
	return nil
}

// worstCase says what a plan's MaxCost assumes: a judge ladder's every rung asked for
// every AC (Cost is its first rung only), and loops and swaps at their bounds.
func worstCase(p *client.Plan) string {
	for _, ac := range p.ACs {
		if len(ac.Ladder) > 0 {
			return "if every rung of the judge ladder is asked for every AC, each at its model's price (the figure above is the first rung only)"
		}
	}
	return "if every AC takes its most calls (rubric loops to their budgets, auto positions in both orders)"
}

// artifactCells are an artifact's ARTIFACT and CLASS cells.
func artifactCells(a client.PlannedArtifact) string {
	class := a.Class
	switch {
	case a.Blocked != "":
		class = "blocked"
	case a.MediaType != "":
		class += " (" + a.MediaType + ")"
	}
	return a.Role + " " + a.Name + "\t" + class
}

// plural is "1 view", "2 views".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
