package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func newReviewCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, export, imp, gold string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "review --batch <id> [--export FILE | --import FILE | --export-gold DIR]",
		Short: "People in the loop: list a batch's review queue, export it blind, import reviewers' answers, export a gold set",
		Long: `review works on a batch's review queue: the judged ACs its review setting sends to people (a
seeded sample, review: {share: 0.1} or {count: 20}, the same ACs on every run of the batch
file; with unsure: true every AC the judge was unsure of; and every AC flagged review:
true).

Without an action it lists the queue: each item's id, AC, kind, why it is queued and who
reviewed it.

--export FILE (- for standard output) writes what each reviewer is shown, blind as the
judge was: the messages the judge was sent (slots A and B, the criterion, the rules), the
images they show, and the shape to answer in. No AC id, path, role, verdict or reason for
being queued is in it, so a team can review in its own tool.

--import FILE records answers: one JSON object mapping an item id (or an AC id) to an
answer in the kind's verdict shape, seed 000's winner-file shape for ab
({"item-…": {"raw_winner": "A", "confidence": 0.8, "biggest_gap": "…"}}). An equivalence
AC is reviewed per case, one item per case: keyed by its AC id, an answer names its case
({"AC-12": {"case": "plain-fix", "verdict": "equivalent", …}}, or a list of such answers).
Every answer is
checked against the kind's answer contract before anything is recorded; the reviewer is
the credential's identity (on the state folder, the local user). Answering again replaces
the person's earlier answer and counts the change.

--export-gold DIR writes the reviewed ab ACs as a calibration set tribunal calibrate
reads (batch.yaml with the artifacts, expectations.yaml with the people's answers,
thresholds.yaml), so a team's own labels measure the next judge.

After tribunal run it works on the state folder (as spotcheck does); against running
services with --nats.`,
		Example: `  tribunal review --batch nightly-20261130T080000-a1b2c3
  tribunal review --batch nightly-20261130T080000-a1b2c3 --export queue.json
  tribunal review --batch nightly-20261130T080000-a1b2c3 --import answers.json
  tribunal review --batch nightly-20261130T080000-a1b2c3 --export-gold ./our-gold && tribunal calibrate ./our-gold --judge openai --judge-model gpt-4o`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, s := range []string{export, imp, gold} {
				if s != "" {
					n++
				}
			}
			if n > 1 {
				return exitError{2, fmt.Errorf("--export, --import and --export-gold: give one of them")}
			}
			return inState(cmd.Context(), &conn, func(env *clientEnv, b bus.Buckets) error {
				ctx := cmd.Context()
				if !cmd.Flags().Changed("tenant") {
					t, err := client.ResolveTenant(ctx, b, "", batchID)
					if err != nil {
						return exitError{2, err}
					}
					tenant = t
				}
				q, _, err := client.ReviewQueue(ctx, b, tenant, batchID)
				if err != nil {
					return exitError{2, err}
				}
				out := cmd.OutOrStdout()
				switch {
				case export != "":
					return exportReview(ctx, env, tenant, q, export, out)
				case imp != "":
					return importReview(ctx, env, b, tenant, batchID, q, imp, out)
				case gold != "":
					jobs, err := records.New(b).LoadJobs(ctx, tenant, batchID)
					if err != nil {
						return exitError{2, err}
					}
					n, err := exportGold(ctx, env.store, jobs, gold)
					if err != nil {
						return exitError{2, err}
					}
					fmt.Fprintf(out, "gold set: %d reviewed AC(s) written to %s (tribunal calibrate %s)\n", n, gold, gold)
					return nil
				}
				if asJSON {
					if q == nil {
						q = []client.ReviewEntry{}
					}
					return writeJSON(out, q)
				}
				fmt.Fprintf(out, "review queue of %s/%s: %d AC(s)\n", tenant, batchID, len(q))
				for _, e := range q {
					who := "not reviewed"
					if len(e.Reviewers) > 0 {
						who = "reviewed by " + strings.Join(e.Reviewers, ", ")
					}
					ac := e.AC
					if e.Case != "" {
						ac += " case " + e.Case
					}
					fmt.Fprintf(out, "  %s  %-20s %-12s %s; %s\n", e.Item, ac, e.Kind, strings.Join(e.Reasons, ", "), who)
				}
				return nil
			})
		},
	}
	conn.register(cmd.Flags())
	conn.registerLocalInput(cmd.Flags(), "review")
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to (default the one whose state holds the batch)")
	fs.StringVar(&batchID, "batch", "", "the batch whose queue to work on")
	fs.StringVar(&export, "export", "", "write the queue as reviewers see it, blind, to this file (- for standard output)")
	fs.StringVar(&imp, "import", "", "record the answers in this JSON file (item or AC id -> answer in the kind's verdict shape)")
	fs.StringVar(&gold, "export-gold", "", "write the reviewed ab ACs as a calibration set into this folder")
	fs.BoolVar(&asJSON, "json", false, "list the queue as JSON")
	_ = cmd.MarkFlagRequired("batch")
	return cmd
}

func exportReview(ctx context.Context, env *clientEnv, tenant string, q []client.ReviewEntry, path string, stdout io.Writer) error {
	ex, err := client.BlindReview(ctx, env.store, q)
	if err != nil {
		return exitError{2, err}
	}
	if err := ex.AddImages(ctx, env.store, tenant); err != nil {
		return exitError{2, err}
	}
	return writeExport(ex, path, stdout)
}

// writeExport writes an export to path (- for standard output).
func writeExport(ex *client.ReviewExport, path string, stdout io.Writer) error {
	w := stdout
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return exitError{2, fmt.Errorf("--export: %w", err)}
		}
		defer f.Close()
		w = f
	}
	if err := writeJSON(w, ex); err != nil {
		return err
	}
	if path != "-" {
		fmt.Fprintf(stdout, "exported %d item(s) to %s\n", len(ex.Items), path)
	}
	return nil
}

func importReview(ctx context.Context, env *clientEnv, b bus.Buckets, tenant, batchID string, q []client.ReviewEntry, path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return exitError{2, fmt.Errorf("--import: %w", err)}
	}
	defer f.Close()
	keys, answers, err := client.ReviewAnswers(f)
	if err != nil {
		return exitError{2, fmt.Errorf("--import %s: %w", path, err)}
	}
	by := client.LocalReviewer()
	resolved, err := client.ResolveAnswers(q, keys, answers)
	if err != nil {
		return exitError{2, fmt.Errorf("--import %s: review queue of %s: %w", path, batchID, err)}
	}
	var entries []client.ReviewEntry
	for _, a := range resolved {
		if err := client.CheckReviewAnswer(a.Entry, a.Answer); err != nil {
			return exitError{2, fmt.Errorf("--import %s: %w", path, err)}
		}
		entries = append(entries, a.Entry)
	}
	// The aggregator may apply two inputs of one job in either order, and a job's
	// reviews are kept in the order applied, which the audit re-derives from the
	// stream's: so an AC's cases are sent round by round, each once the last is applied.
	var rounds [][]client.ResolvedAnswer
	nth := map[string]int{}
	for _, a := range resolved {
		i := nth[a.Entry.AC]
		nth[a.Entry.AC]++
		if i == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[i] = append(rounds[i], a)
	}
	for i, round := range rounds {
		if i > 0 {
			if err := reviewsApplied(ctx, env, b, tenant, batchID, by, rounds[i-1]); err != nil {
				return exitError{2, err}
			}
		}
		for _, a := range round {
			if err := client.RecordReview(env.pub, a.Entry, a.Answer, by, "import"); err != nil {
				return exitError{2, err}
			}
		}
	}
	if env.applied == nil {
		fmt.Fprintf(out, "%d review(s) sent by %s\n", len(entries), by)
		return nil
	}
	if err := env.applied(ctx); err != nil {
		return exitError{2, fmt.Errorf("reviews: %w", err)}
	}
	recorded, changed := 0, 0
	for _, e := range entries {
		j, err := client.FindJob(ctx, b, tenant, batchID, e.AC)
		if err != nil {
			return exitError{2, err}
		}
		for _, r := range j.Reviews {
			if r.By == by && r.Case == e.Case {
				recorded++
				if r.Changes > 0 {
					changed++
				}
			}
		}
	}
	if recorded != len(entries) {
		return exitError{2, fmt.Errorf("reviews: %d of %d recorded; the aggregator's log says why", recorded, len(entries))}
	}
	fmt.Fprintf(out, "%d review(s) recorded by %s (%d changed an earlier answer)\n", recorded, by, changed)
	return nil
}

// reviewsApplied waits until the aggregator applied (or refused) the reviews sent: on the
// state folder until it is idle, against running services until the records hold them.
func reviewsApplied(ctx context.Context, env *clientEnv, b bus.Buckets, tenant, batchID, by string, sent []client.ResolvedAnswer) error {
	if env.applied != nil {
		if err := env.applied(ctx); err != nil {
			return fmt.Errorf("reviews: %w", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		left := 0
		for _, a := range sent {
			ev, err := client.ReviewCaseEvent(a.Entry.Job(), a.Entry.Case, a.Answer, by, "import")
			if err != nil {
				return err
			}
			j, err := client.FindJob(ctx, b, tenant, batchID, a.Entry.AC)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(j.Reviews, func(r records.Review) bool { return r.Event == ev.ID }) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reviews: %d not applied within %s; the aggregator's log says why", left, applyWait)
		case <-t.C:
		}
	}
}

// printPeople writes the judges' agreement with the people who reviewed them: per judge
// model and kind, the share agreeing and kappa with their intervals, per score dimension,
// which way the judge errs, and the ACs where they disagree.
func printPeople(w io.Writer, rep *client.ReviewReport) {
	if rep == nil {
		return
	}
	mode := "measures the judges"
	if rep.Decides {
		mode = "decides the outcome"
	}
	fmt.Fprintf(w, "agreement with people (%d reviewed AC(s), %d review(s); the review %s):\n", rep.Reviewed, rep.Reviews, mode)
	for _, a := range rep.Agreement {
		fmt.Fprintf(w, "  %s on %s: agreement %s\n", a.Model, a.Kind, a.Share)
		if a.Kappa.Defined {
			fmt.Fprintf(w, "    Cohen's kappa %.3f [%.3f, %.3f] (observed %.3f, chance %.3f)\n", a.Kappa.Point, a.Kappa.Lo, a.Kappa.Hi, a.Kappa.Observed, a.Kappa.Chance)
		} else {
			fmt.Fprintln(w, "    Cohen's kappa undefined: judge and people gave one label throughout")
		}
		fmt.Fprintf(w, "    the judge was more lenient than people on %d, stricter on %d; picked slot A against people %d time(s), people picked slot A against it %d\n",
			a.Lenient, a.Strict, a.JudgeSlotA, a.PersonSlotA)
		for _, s := range a.Scores {
			k := "undefined"
			if s.Kappa.Defined {
				k = fmt.Sprintf("%.3f [%.3f, %.3f]", s.Kappa.Point, s.Kappa.Lo, s.Kappa.Hi)
			}
			fmt.Fprintf(w, "    %s: exact %s, weighted kappa %s, mean absolute difference %.3f [%.3f, %.3f], judge higher %d, lower %d\n",
				s.Dimension, s.Exact, k, s.MeanAbsDiff.Point, s.MeanAbsDiff.Lo, s.MeanAbsDiff.Hi, s.Higher, s.Lower)
		}
		if len(a.Disagreements) > 0 {
			fmt.Fprintf(w, "    disagreements (%d):\n", len(a.Disagreements))
			for _, d := range a.Disagreements {
				lean := ""
				if d.Lean != "" {
					lean = " (judge " + map[string]string{"lenient": "too lenient", "strict": "too strict"}[d.Lean] + ")"
				}
				ac := d.AC
				if d.Case != "" {
					ac += " case " + d.Case
				}
				fmt.Fprintf(w, "      %s: judge %s, %s %s%s\n", ac, d.Judge, d.By, d.Person, lean)
			}
		}
	}
}
