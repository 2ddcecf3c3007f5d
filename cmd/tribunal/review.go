package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

func newReviewCmd() *cobra.Command {
	var conn connFlags
	var ing ingressFlags
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
reviewed it (through the ingress, blind: see below).

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

--export-gold DIR writes the reviewed ACs as a calibration set tribunal calibrate
reads (batch.yaml with the artifacts, expectations.yaml with the people's answers,
thresholds.yaml), so a team's own labels measure the next judge. Calibrate scores ab's
pairwise answers only (accuracy, ties, order, length, injection against a known winner),
so only reviewed ab ACs whose reviewers agree are written; it reports per kind how many
reviewed ACs it wrote and how many it skipped and why (an ab AC whose reviewers disagree
has no known answer; a critic, equivalence or rubric verdict has no known-answer form
calibrate reads), and exits 2 when it has nothing to write.

After tribunal run it works on the state folder (as spotcheck does); against running
services with --nats. A team on a shared deployment works through the ingress with
--ingress URL and its token (--token-file, or TRIBUNAL_TOKEN), on its own batches only.
There the queue is listed as a reviewer is shown it, blind: each item's id, kind,
whether it was reviewed and your own answer, never its AC, case or the judge's verdict.
The blind export's images are fetched as the team's blobs; the import posts the answers
file to the ingress, which checks every answer and records it as a review.recorded
event by the token's holder (ingress:<team> (token …)), and waits until the listing
shows it; --export-gold there writes the queue's reviewed ACs as above. The ingress's
quotas and rules apply. A reviewer's own token (tribunal tenants --reviewer) lists,
exports and imports the same way, and nothing else: --export-gold, which holds the specs
and everyone's answers, needs the team's token.`,
		Example: `  tribunal review --batch nightly-20261130T080000-a1b2c3
  tribunal review --batch nightly-20261130T080000-a1b2c3 --export queue.json
  tribunal review --batch nightly-20261130T080000-a1b2c3 --import answers.json
  tribunal review --batch nightly-20261130T080000-a1b2c3 --ingress https://tribunal.example.com --token-file team-a.token --export queue.json
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
			if c, err := ing.dialAs(cmd, tenant); err != nil {
				return err
			} else if c != nil {
				return reviewThroughIngress(cmd.Context(), c, batchID, export, imp, gold, asJSON, cmd.OutOrStdout())
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
					return importReview(ctx, localDest(env, b, tenant, batchID), batchID, q, imp, out)
				case gold != "":
					jobs, err := records.New(b).LoadJobs(ctx, tenant, batchID)
					if err != nil {
						return exitError{2, err}
					}
					return writeGold(ctx, env.store, jobs, gold, "", out)
				}
				return printQueue(out, tenant, batchID, q, asJSON)
			})
		},
	}
	conn.register(cmd.Flags())
	conn.registerLocalInput(cmd.Flags(), "review")
	ing.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&tenant, "tenant", "default", "tenant (team) the batch belongs to (default the one whose state holds the batch)")
	fs.StringVar(&batchID, "batch", "", "the batch whose queue to work on")
	fs.StringVar(&export, "export", "", "write the queue as reviewers see it, blind, to this file (- for standard output)")
	fs.StringVar(&imp, "import", "", "record the answers in this JSON file (item or AC id -> answer in the kind's verdict shape)")
	fs.StringVar(&gold, "export-gold", "", "write the reviewed ACs tribunal calibrate reads (ab's) as a calibration set into this folder, reporting per kind those it skips and why")
	fs.BoolVar(&asJSON, "json", false, "list the queue as JSON")
	_ = cmd.MarkFlagRequired("batch")
	return cmd
}

// writeGold is --export-gold: the calibration set of the reviewed jobs, and what of each
// kind it wrote and skipped, and why. Nothing to write is exit 2, saying what was skipped.
func writeGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir, of string, out io.Writer) error {
	rep, err := exportGold(ctx, store, jobs, dir)
	if err != nil {
		return exitError{2, err}
	}
	if rep.total() == 0 {
		var sb strings.Builder
		rep.write(&sb)
		return exitError{2, fmt.Errorf("export-gold: no reviewed AC%s that tribunal calibrate can read to write\n%s", of, strings.TrimRight(sb.String(), "\n"))}
	}
	fmt.Fprintf(out, "gold set: %d reviewed AC(s)%s written to %s (tribunal calibrate %s)\n", rep.total(), of, dir, dir)
	rep.write(out)
	return nil
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

// reviewDest is where --import sends answers and reads them back: the state folder or
// the services (localDest); through the ingress, importThroughIngress.
type reviewDest struct {
	pub client.Publisher
	// by is who the reviews are by: the local user, or the ingress token's holder.
	by string
	// applied waits until the aggregator applied what was sent (the state folder's);
	// nil not to look at all (services elsewhere apply it in their own time).
	applied func(context.Context) error
	// jobs reads the batch's job records as they are now, by AC id.
	jobs func(ctx context.Context) (func(ac string) (*records.Job, error), error)
}

// localDest sends answers on the state folder's or services' bus, by the local user.
func localDest(env *clientEnv, b bus.Buckets, tenant, batchID string) reviewDest {
	return reviewDest{pub: env.pub, by: client.LocalReviewer(), applied: env.applied,
		jobs: func(ctx context.Context) (func(string) (*records.Job, error), error) {
			return func(ac string) (*records.Job, error) { return client.FindJob(ctx, b, tenant, batchID, ac) }, nil
		}}
}

// reviewThroughIngress is review --ingress: the blind queue, its blind export, the
// answers and the gold set of one of the token's team's batches, read and sent through
// the ingress. What it lists of the queue is what a reviewer is shown (ingress.QueueItem):
// item ids, never the ACs, cases or the judge's verdicts.
func reviewThroughIngress(ctx context.Context, c *ingress.Client, batchID, export, imp, gold string, asJSON bool, out io.Writer) error {
	switch {
	case export != "":
		ex, err := c.ReviewExport(ctx, batchID)
		if err != nil {
			return exitError{2, err}
		}
		return writeExport(ex, export, out)
	case imp != "":
		return importThroughIngress(ctx, c, batchID, imp, out)
	case gold != "":
		// The gold set is made of the queue's reviewed ACs: their specs and people's
		// answers come from the ingress, their artifacts through the blob GET under the
		// token's tenant.
		jobs, err := c.ReviewGold(ctx, batchID)
		if err != nil {
			return exitError{2, err}
		}
		return writeGold(ctx, c, jobs, gold, " of the review queue", out)
	}
	q, err := c.ReviewQueue(ctx, batchID)
	if err != nil {
		return exitError{2, err}
	}
	if asJSON {
		return writeJSON(out, q)
	}
	fmt.Fprintf(out, "review queue of %s/%s: %d item(s)\n", c.Tenant(), batchID, len(q))
	for _, it := range q {
		yours := "not answered by you"
		if it.Yours != nil {
			yours = "your answer " + string(it.Yours.Answer)
		}
		fmt.Fprintf(out, "  %s  %-12s %-10s %s\n", it.Item, it.Kind, it.Status, yours)
	}
	return nil
}

// importThroughIngress is review --ingress --import: the answers file goes to the
// ingress, which checks and records it by the token's holder; what it leaves for later
// (an AC's further cases) is sent once the listing shows what it recorded.
func importThroughIngress(ctx context.Context, c *ingress.Client, batchID, path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return exitError{2, fmt.Errorf("--import: %w", err)}
	}
	data, err := io.ReadAll(io.LimitReader(f, client.MaxReviewFile+1))
	f.Close()
	if err != nil {
		return exitError{2, fmt.Errorf("--import: %w", err)}
	}
	if _, _, err := client.ReviewAnswers(bytes.NewReader(data)); err != nil {
		return exitError{2, fmt.Errorf("--import %s: %w", path, err)}
	}
	var sent []ingress.AnswerItem
	for body := data; len(body) > 0; {
		a, err := c.RecordAnswers(ctx, batchID, body)
		if err != nil {
			return exitError{2, fmt.Errorf("--import %s: %w", path, err)}
		}
		sent = append(sent, a.Items...)
		if _, err := answersShown(ctx, c, batchID, a.Items); err != nil {
			return exitError{2, err}
		}
		body = a.Later
	}
	q, err := answersShown(ctx, c, batchID, sent)
	if err != nil {
		return exitError{2, err}
	}
	changed := 0
	for _, it := range q {
		if it.Yours != nil && it.Yours.Changes > 0 && slices.ContainsFunc(sent, func(a ingress.AnswerItem) bool { return a.Item == it.Item }) {
			changed++
		}
	}
	fmt.Fprintf(out, "%d review(s) recorded by %s (%d changed an earlier answer)\n", len(sent), c.Reviewer(), changed)
	return nil
}

// answersShown waits until the blind listing shows each answer sent as the token
// holder's own, and returns the listing then.
func answersShown(ctx context.Context, c *ingress.Client, batchID string, sent []ingress.AnswerItem) ([]ingress.QueueItem, error) {
	ctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		q, err := c.ReviewStatus(ctx, batchID)
		if err != nil {
			return nil, err
		}
		yours := map[string]string{}
		for _, it := range q {
			if it.Yours != nil {
				yours[it.Item] = compactJSON(it.Yours.Answer)
			}
		}
		left := 0
		for _, a := range sent {
			if yours[a.Item] != compactJSON(a.Answer) {
				left++
			}
		}
		if left == 0 {
			return q, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reviews: %d of %d not applied within %s; the aggregator's log says why", left, len(sent), applyWait)
		case <-t.C:
		}
	}
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// printQueue lists a review queue, as JSON or a line per item.
func printQueue(out io.Writer, tenant, batchID string, q []client.ReviewEntry, asJSON bool) error {
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
}

func importReview(ctx context.Context, d reviewDest, batchID string, q []client.ReviewEntry, path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return exitError{2, fmt.Errorf("--import: %w", err)}
	}
	defer f.Close()
	keys, answers, err := client.ReviewAnswers(f)
	if err != nil {
		return exitError{2, fmt.Errorf("--import %s: %w", path, err)}
	}
	by := d.by
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
			if err := reviewsApplied(ctx, d, rounds[i-1]); err != nil {
				return exitError{2, err}
			}
		}
		for _, a := range round {
			if err := client.RecordReview(d.pub, a.Entry, a.Answer, by, "import"); err != nil {
				return exitError{2, err}
			}
		}
	}
	if d.applied == nil {
		fmt.Fprintf(out, "%d review(s) sent by %s\n", len(entries), by)
		return nil
	}
	if err := reviewsApplied(ctx, d, resolved); err != nil {
		return exitError{2, err}
	}
	job, err := d.jobs(ctx)
	if err != nil {
		return exitError{2, err}
	}
	recorded, changed := 0, 0
	for _, e := range entries {
		j, err := job(e.AC)
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
func reviewsApplied(ctx context.Context, d reviewDest, sent []client.ResolvedAnswer) error {
	if d.applied != nil {
		if err := d.applied(ctx); err != nil {
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
		job, err := d.jobs(ctx)
		if err != nil {
			return err
		}
		for _, a := range sent {
			ev, err := client.ReviewCaseEvent(a.Entry.Job(), a.Entry.Case, a.Answer, d.by, "import")
			if err != nil {
				return err
			}
			j, err := job(a.Entry.AC)
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
		fmt.Fprintf(w, "    the judge was more lenient than people on %d, stricter on %d", a.Lenient, a.Strict)
		if pairwise(events.Kind(a.Kind)) {
			// Only a pairwise kind's verdicts (ab's) pick a blind slot.
			fmt.Fprintf(w, "; picked slot A against people %d time(s), people picked slot A against it %d", a.JudgeSlotA, a.PersonSlotA)
		}
		fmt.Fprintln(w)
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

// pairwise reports whether kind k's judge picks one of two blind slots (trust.Pairwise),
// so its agreement with people has slot-A counts to show.
func pairwise(k events.Kind) bool {
	impl, err := kind.Lookup(k)
	if err != nil {
		return false
	}
	_, ok := impl.(trust.Pairwise)
	return ok
}
