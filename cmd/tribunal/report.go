package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/trials"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// reportOptions are the choices a trust report is computed with.
type reportOptions struct {
	level     float64
	seed      uint64
	resamples int
}

func newReportCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID string
	var asJSON bool
	var o reportOptions
	var prices priceFlags
	cmd := &cobra.Command{
		Use:   "report --batch <id>",
		Short: "How far to trust a batch's judges: outcome rates, position bias, flips, panel agreement, length sensitivity, HE-2, usage",
		Long: `report computes, per judge model and for all judges together, the figures docs/judging.md
explains: outcome rates with Wilson intervals and the score with a seeded bootstrap
interval; position bias (how often slot A won, against the 50% an unbiased judge gives on
a shuffled batch) and, for swapped ACs, the flip rate and what the flips looked like;
Krippendorff's alpha and pairwise agreement of a panel, with the ACs it split on; the
longer text's win rate by length ratio; people's agreement in HE-2 spot checks per
rubric dimension; and the calls, tokens, latency and cache hits of every judge.

It reads the batch's final job records and replays its events from the stream (nothing
is acked, no service is disturbed), so it needs the services' NATS user, like audit.
The same seed gives the same intervals on every machine.`,
		Example: `  tribunal report --batch quickstart-20261130T080000-a1b2c3 --tenant default
  tribunal report --batch nightly-20261130T080000-a1b2c3 --json > trust.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return exitError{2, err}
			}
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				if !cmd.Flags().Changed("tenant") {
					// The state knows whose the batch is.
					t, err := client.ResolveTenant(cmd.Context(), b, "", batchID)
					if err != nil {
						return exitError{2, err}
					}
					tenant = t
				}
				rep, err := buildTrustReport(cmd.Context(), env.js, b, conn.stream, tenant, batchID, o)
				if err != nil {
					return exitError{2, err}
				}
				jobs, err := records.New(b).LoadJobs(cmd.Context(), tenant, batchID)
				if err != nil {
					return exitError{2, err}
				}
				costs := records.CostsOf(jobs)
				table, err := prices.tableOf()
				if err != nil {
					return exitError{2, err}
				}
				z, _ := stats.ZFor(o.level)
				stability := trials.StabilityOf(jobs, z)
				ladder := trials.LadderOf(jobs, table.Lookup, z)
				people, err := client.ReviewAgreement(jobs, o.seed)
				if err != nil {
					return exitError{2, err}
				}
				if asJSON {
					// The trust report's fields, what the batch's calls cost, its trials'
					// stability and ladder, and the judges' agreement with people.
					return writeJSON(cmd.OutOrStdout(), struct {
						*trust.Report
						Cost   records.Costs        `json:"cost"`
						Trials []trials.Stability   `json:"trials,omitempty"`
						Ladder *trials.LadderReport `json:"ladder,omitempty"`
						People *client.ReviewReport `json:"people,omitempty"`
					}{rep, costs, stability, ladder, people})
				}
				printTrustReport(cmd.OutOrStdout(), tenant, batchID, rep)
				printCosts(cmd.OutOrStdout(), costs)
				printTrials(cmd.OutOrStdout(), stability, ladder)
				printPeople(cmd.OutOrStdout(), people)
				return nil
			})
		},
	}
	conn.register(cmd.Flags())
	conn.registerLocal(cmd.Flags(), "report")
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to (default the one whose state holds the batch)")
	cmd.Flags().StringVar(&batchID, "batch", "", "the batch to report on")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	registerReportOptions(cmd, &o)
	prices.register(cmd.Flags())
	_ = cmd.MarkFlagRequired("batch")
	return cmd
}

// registerReportOptions adds the report's statistical options to cmd.
func registerReportOptions(cmd *cobra.Command, o *reportOptions) {
	d := defaultReportOptions
	cmd.Flags().Float64Var(&o.level, "interval-level", d.level, "confidence level of every interval")
	cmd.Flags().Uint64Var(&o.seed, "bootstrap-seed", d.seed, "seed of the score's bootstrap interval (the report records it)")
	cmd.Flags().IntVar(&o.resamples, "bootstrap-resamples", d.resamples, "resamples of the score's bootstrap interval")
}

func (o reportOptions) check() error {
	if _, err := stats.ZFor(o.level); err != nil {
		return fmt.Errorf("--interval-level: %w", err)
	}
	if o.resamples < 1 {
		return fmt.Errorf("--bootstrap-resamples %d: want at least 1", o.resamples)
	}
	return nil
}

// defaultReportOptions are the flags' defaults, which the console's report page uses.
var defaultReportOptions = reportOptions{level: 0.95, seed: 1, resamples: 1000}

// reportHook lets the console show a batch's trust report.
func reportHook(js jetstream.JetStream, b bus.Buckets, stream string) console.ReportFunc {
	return func(ctx context.Context, tenant, batch string) (*trust.Report, error) {
		return buildTrustReport(ctx, js, b, stream, tenant, batch, defaultReportOptions)
	}
}

// buildTrustReport reads a batch's final records and replays its events, and computes
// its trust report. The console's report page calls it too.
func buildTrustReport(ctx context.Context, js jetstream.JetStream, b bus.Buckets, stream, tenant, batchID string, o reportOptions) (*trust.Report, error) {
	jobs, err := records.New(b).LoadJobs(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("batch %s/%s: no job records (unknown batch, or nothing submitted yet)", tenant, batchID)
	}
	var evs []events.Event
	err = audit.ReplayOwn(ctx, js, audit.Filter{Tenant: tenant, BatchID: batchID, Stream: stream}, func(r *audit.Recorded) error {
		if r.OK() && r.DeadLetter == "" && !r.History {
			evs = append(evs, r.Event)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay the stream (needs the services' NATS user): %w", err)
	}
	in := collect.Input(jobs, evs)
	in.Level, in.Seed, in.Resamples = o.level, o.seed, o.resamples
	rep, err := trust.BuildReport(in)
	if err != nil {
		return nil, fmt.Errorf("batch %s/%s: %w", tenant, batchID, err)
	}
	return &rep, nil
}

// printTrustReport writes the report as text: the batch's outcomes, each judge's
// figures, the figures over every judge, the panel and the spot checks.
func printTrustReport(w io.Writer, tenant, batchID string, r *trust.Report) {
	fmt.Fprintf(w, "trust report of batch %s (tenant %s): %s; %.0f%% Wilson intervals, score by bootstrap (%d resamples, seed %d)\n",
		batchID, tenant, plural(r.Outcomes.ACs, "ab AC"), 100*r.Level, r.Resamples, r.Seed)
	fmt.Fprintln(w, "\noutcomes of the batch")
	printOutcomes(w, "  ", r.Outcomes)
	for _, j := range r.Judges {
		fmt.Fprintf(w, "\njudge %s\n", j.Judge)
		if j.Outcomes != nil {
			printOutcomes(w, "  ", *j.Outcomes)
		}
		printJudge(w, j)
	}
	if len(r.Judges) > 1 {
		fmt.Fprintln(w, "\nevery judge together")
		printJudge(w, r.Overall)
	}
	if p := r.Panel; p != nil {
		fmt.Fprintf(w, "\npanel of %d judges: %s\n", len(p.Judges), strings.Join(p.Judges, ", "))
		if p.Alpha != nil {
			fmt.Fprintf(w, "  Krippendorff's alpha (nominal) %.3f over %s: %s\n", p.Alpha.Alpha, plural(p.Alpha.Units, "AC"), alphaReading(p.Alpha.Alpha))
		} else {
			fmt.Fprintf(w, "  Krippendorff's alpha %s\n", p.AlphaNote)
		}
		fmt.Fprintln(w, "  pairwise agreement:")
		for _, pr := range p.Pairs {
			fmt.Fprintf(w, "    %s ~ %s: %s\n", pr.A, pr.B, pr.Proportion)
		}
		if len(p.Split) == 0 {
			fmt.Fprintln(w, "  no split AC: the judges who answered agreed on every AC")
		} else {
			fmt.Fprintf(w, "  split ACs (%d):\n", len(p.Split))
			for _, s := range p.Split {
				var parts []string
				for _, j := range slices.Sorted(maps.Keys(s.Answers)) {
					parts = append(parts, j+"="+s.Answers[j])
				}
				fmt.Fprintf(w, "    %s: %s\n", s.AC, strings.Join(parts, ", "))
			}
		}
	}
	if sc := r.SpotChecks; sc != nil {
		fmt.Fprintf(w, "\nHE-2 spot checks: %d, approved outright %s\n", sc.Checks, sc.Approved)
		for _, d := range sc.Dimensions {
			fmt.Fprintf(w, "  %s: people agreed %s\n", d.Dimension, d.Proportion)
		}
	}
}

func printOutcomes(w io.Writer, indent string, o trust.OutcomeRates) {
	fmt.Fprintf(w, "%sours %s, reference %s\n", indent, o.Ours, o.Reference)
	fmt.Fprintf(w, "%stie %s, blocked %s\n", indent, o.Tie, o.Blocked)
	if o.Scored > 0 {
		fmt.Fprintf(w, "%sscore %.3f [%.3f, %.3f] over %s not blocked (ours 1, tie 0.5, reference 0)\n", indent, o.Score.Point, o.Score.Lo, o.Score.Hi, plural(o.Scored, "AC"))
	}
}

func printJudge(w io.Writer, j trust.JudgeReport) {
	b := j.PositionBias
	verdict := "no decided answer"
	switch {
	case b.SlotA.N > 0 && b.Biased:
		verdict = "BIASED: the interval excludes 0.5"
	case b.SlotA.N > 0:
		verdict = "no bias shown: the interval holds 0.5"
	}
	fmt.Fprintf(w, "  position bias: slot A won %s of %d calls (%d ties, %d unanswered): %s\n", b.SlotA, b.Calls, b.Ties, b.Unanswered, verdict)
	f := j.Flips
	if f.Pairs+f.Unpaired == 0 {
		fmt.Fprintln(w, "  flips: no AC judged in both orders")
	} else {
		var pats []string
		for _, k := range slices.Sorted(maps.Keys(f.Patterns)) {
			pats = append(pats, fmt.Sprintf("%s %d", k, f.Patterns[k]))
		}
		fmt.Fprintf(w, "  flips: %s of swapped pairs flipped (%d unpaired); patterns %s\n", f.Rate, f.Unpaired, strings.Join(pats, ", "))
		if len(f.Flipped) > 0 {
			fmt.Fprintf(w, "    flipped: %s\n", clip(strings.Join(f.Flipped, ", "), 400))
		}
	}
	l := j.Length
	fmt.Fprintf(w, "  length: %s: %s\n", l.Verdict, l.Reason)
	if l.Verdict != trust.LengthNoData {
		var bins []string
		for _, bin := range l.Bins {
			if bin.LongerWins.N > 0 {
				bins = append(bins, fmt.Sprintf("%s %s", bin.Label, bin.LongerWins))
			}
		}
		if len(bins) > 0 {
			fmt.Fprintf(w, "    longer side won, by ratio: %s\n", strings.Join(bins, "; "))
		}
	}
	u := j.Usage
	fmt.Fprintf(w, "  usage: %d calls (%d to the provider, %d failed; %d cache hits = %.0f%%), tokens %d prompt / %d completion, latency p50 %.0f ms, p95 %.0f ms\n",
		u.Calls, u.ProviderCalls, u.Failed, u.CacheHits, 100*u.CacheHitRate, u.PromptTokens, u.CompletionTokens, u.LatencyP50, u.LatencyP95)
}

// printCosts writes what the batch's calls cost, in all and per judge, kind and team.
func printCosts(w io.Writer, c records.Costs) {
	fmt.Fprintf(w, "\ncost of the batch: %s", c.Total)
	if len(c.PriceTables) > 0 {
		fmt.Fprintf(w, " at prices %s", strings.Join(c.PriceTables, ", "))
	}
	fmt.Fprintln(w)
	for _, by := range []struct {
		what string
		m    map[string]price.Sum
	}{{"judge", c.ByJudge}, {"kind", c.ByKind}, {"team", c.ByTenant}} {
		for _, k := range slices.Sorted(maps.Keys(by.m)) {
			s := by.m[k]
			fmt.Fprintf(w, "  %s %s: %s (tokens %d prompt, %d of them cached, / %d completion)\n", by.what, k, s, s.PromptTokens, s.CachedPromptTokens, s.CompletionTokens)
		}
	}
	if c.BudgetRefused > 0 {
		fmt.Fprintf(w, "  %s refused by a budget (never sent)\n", plural(c.BudgetRefused, "call"))
	}
}

// alphaReading is Krippendorff's guidance for an alpha.
func alphaReading(a float64) string {
	switch {
	case a >= 0.8:
		return "reliable (>= 0.800)"
	case a >= 0.667:
		return "tentative conclusions only (0.667 to 0.800)"
	}
	return "not reliable (< 0.667)"
}

// printTrials writes the stability of judges asked several times and what a judge ladder
// did, when the batch had either.
func printTrials(w io.Writer, stability []trials.Stability, ladder *trials.LadderReport) {
	if len(stability) > 0 {
		fmt.Fprintln(w, "\nrepeated trials: ACs whose trials all agreed")
		for _, s := range stability {
			fmt.Fprintf(w, "  %s: %s, mean agreement %.3f\n", s.Judge, s.Stable, s.MeanAgreement)
		}
	}
	if l := ladder; l != nil {
		fmt.Fprintf(w, "\njudge ladder %s over %s\n", strings.Join(l.Rungs, " -> "), plural(l.ACs, "AC"))
		for _, c := range l.Coverage {
			fmt.Fprintf(w, "  rung %d %s decided %s (%s)\n", c.Rung+1, c.Model, c.Decided, plural(c.Calls, "call"))
		}
		fmt.Fprintf(w, "  where both answered, the later rung agreed with the first: %s\n", l.Agreement)
		fmt.Fprintf(w, "  cost %s", l.Cost)
		if l.StrongForAll != nil {
			fmt.Fprintf(w, "; asking %s for every AC: %s; saved %s", l.Rungs[len(l.Rungs)-1], l.StrongForAll.Cost, *l.Saving)
		} else {
			fmt.Fprintf(w, "; %s has no price, so no saving is stated", l.Rungs[len(l.Rungs)-1])
		}
		fmt.Fprintf(w, "\n  (estimated from %s)\n", l.Counterfactual)
	}
}
