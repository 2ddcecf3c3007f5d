package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"

	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// progressReporter shows batch progress: a bar on a terminal, plain lines in a pipe.
type progressReporter struct {
	bar      *progressbar.ProgressBar
	w        io.Writer
	last     time.Time
	lastDone int
}

func newProgress(w *os.File, quiet bool) *progressReporter {
	p := &progressReporter{w: w}
	if quiet {
		p.w = io.Discard
		return p
	}
	if isatty.IsTerminal(w.Fd()) || isatty.IsCygwinTerminal(w.Fd()) {
		p.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("judging"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("ACs"),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progressReporter) report(pr client.Progress) {
	if p.bar != nil {
		if p.bar.GetMax() != pr.Total {
			p.bar.ChangeMax(pr.Total)
		}
		_ = p.bar.Set(pr.Done)
		if pr.Completion != nil {
			_ = p.bar.Finish()
		}
		return
	}
	if pr.Done == p.lastDone && pr.Completion == nil {
		return
	}
	if time.Since(p.last) < time.Second && pr.Completion == nil {
		return
	}
	p.last, p.lastDone = time.Now(), pr.Done
	fmt.Fprintf(p.w, "progress: %d/%d ACs decided\n", pr.Done, pr.Total)
}

// printResults writes the results table and summary, or JSON.
func printResults(w io.Writer, res *client.Results, outDir string, asJSON bool) error {
	if asJSON {
		return res.WriteJSON(w) // a row at a time: a large batch's whole encoding is never held
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AC\tKIND\tSTATUS\tRESULT\tCONF\tTAG\tJUDGE\tCOST\tNOTE")
	// A blocked AC's cause (or a schema violation's) is what its owner must fix: when the
	// table cuts it short, it follows the table in full.
	var causes []string
	for _, r := range res.Rows {
		conf := "-"
		if r.Confidence != nil {
			conf = fmt.Sprintf("%.2f", *r.Confidence)
		}
		// The judge's own words about slots, with which artifact each slot was; the
		// legend is never the part the column cuts.
		note := r.BiggestGap
		if note != "" && r.Slots != "" {
			legend := " (" + r.Slots + ")"
			note = clip(note, max(24, 96-len(legend))) + legend
		}
		if r.Detail != "" {
			note = r.Detail
		}
		if r.Reason != "" {
			note = r.Reason
		}
		result := r.Winner
		if r.Verdict != "" {
			result = r.Verdict
			if r.Quality != nil {
				result += fmt.Sprintf(" (%d)", *r.Quality)
			}
		}
		judgeName := r.Judge
		if r.Cached {
			judgeName += " (cached)"
		}
		shown := clip(note, 96)
		if r.Reason != "" && shown != note {
			causes = append(causes, fmt.Sprintf("  %s (%s): %s", r.ACID, r.Status, r.Reason))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ACID, r.Kind, r.Status, dash(result), conf, dash(r.Tag), dash(judgeName), costCell(r.Cost), shown)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(causes) > 0 {
		fmt.Fprintf(w, "\ncauses in full:\n%s\n", strings.Join(causes, "\n"))
	}
	s := res.Summary
	fmt.Fprintf(w, "\nbatch %s (tenant %s): %s, %d compared, %d blocked, %s, %s; exit code %d\n",
		res.BatchID, res.Tenant, plural(s.Total, "AC"), s.Compared, s.Blocked, plural(s.Violations, "schema violation"), plural(s.Suggestions, "finding"), s.ExitCode)
	if rv := res.Revised; rv != nil {
		fmt.Fprintf(w, "revised after it completed: %s decided by people's reviews, the latest by review %s\n", plural(rv.Reviews, "outcome"), rv.By)
	}
	for _, j := range res.Judges {
		fmt.Fprintf(w, "verdicts by judge %s%s\n", j, judgeNote(j))
	}
	if line := costLine(res.Cost); line != "" {
		fmt.Fprintln(w, line)
	}
	if len(res.Judges) == 0 && len(res.Rows) > 0 {
		fmt.Fprintf(w, "no judge was asked: %s\n", unjudged(res.Rows))
	}
	var unpinned []string
	for _, r := range res.Rows {
		if r.Unpinned {
			unpinned = append(unpinned, r.ACID)
		}
	}
	if len(unpinned) > 0 {
		fmt.Fprintf(w, "temperature not pinned for %d verdicts (the server's default applied; judged again they may differ): %s\n",
			len(unpinned), clip(strings.Join(unpinned, ", "), 200))
	}
	if outDir != "" {
		fmt.Fprintf(w, "results written to %s\n", outDir)
	}
	return nil
}

// unjudged says why no AC reached a judge, in the words of the rows' statuses, so it
// agrees with the counts above it: blocked ACs, views stopped by a red gate (the floor
// keeps the judge away: needs_fixes, or a budget spent on red gates), views waiting for a
// reference image (HE-1).
func unjudged(rows []client.Row) string {
	counts := map[string]int{}
	var order []string
	for _, r := range rows {
		what := r.Status
		switch r.Status {
		case string(events.StatusBlocked):
			what = "blocked before judging"
		case string(events.StatusNeedsFixes):
			what = "stopped by a red gate"
		case string(events.StatusBudgetExhausted):
			what = "out of budget on red gates"
		case string(events.StatusNeedsContext):
			what = "waiting for a reference image (HE-1)"
		}
		if counts[what] == 0 {
			order = append(order, what)
		}
		counts[what]++
	}
	parts := make([]string, len(order))
	for i, what := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[what], what)
	}
	return strings.Join(parts, ", ")
}

// costCell is a row's cost in the results table: "0.000123 USD", "unpriced", "cached"
// (a hit costs nothing), "-" for no call.
func costCell(c *price.Sum) string {
	switch {
	case c == nil || c.Zero():
		return "-"
	case c.CacheHits == c.Priced && c.Unpriced == 0 && c.Cost == 0:
		return "0 (cached)"
	case c.Priced == 0:
		return "unpriced"
	case c.Recorded == c.Priced && c.Unpriced == 0 && c.Cost == 0:
		return "0 (" + price.RecordedReason + ")"
	case c.Unpriced > 0:
		return c.Cost.Decimal() + " USD + unpriced"
	}
	return c.Cost.String()
}

// costLine is the batch's cost under the table: in all, then per judge, with the price
// table; "" when no call was made.
func costLine(c records.Costs) string {
	if c.Total.Zero() && c.BudgetRefused == 0 {
		return ""
	}
	line := "cost: " + c.Total.String()
	if len(c.ByJudge) > 1 {
		var parts []string
		for _, j := range slices.Sorted(maps.Keys(c.ByJudge)) {
			parts = append(parts, j+" "+c.ByJudge[j].String())
		}
		line += " (" + strings.Join(parts, "; ") + ")"
	}
	if len(c.PriceTables) > 0 {
		line += ", prices " + strings.Join(c.PriceTables, ", ")
	}
	if c.BudgetRefused > 0 {
		line += fmt.Sprintf("; %s refused by a budget", plural(c.BudgetRefused, "call"))
	}
	return line
}

func judgeNote(name string) string {
	if strings.HasPrefix(name, "scripted/") {
		return " (scripted: recorded answers, no model was asked)"
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// writeJSON writes v as the indented JSON every --json flag of the CLI prints.
func writeJSON(w io.Writer, v any) error {
	return cli.WriteJSON(w, v)
}
