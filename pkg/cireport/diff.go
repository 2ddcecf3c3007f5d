package cireport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// Diff is `tribunal diff BASE NEW`: two batches' results compared AC by AC, and which
// regressions fail under the policy.
type Diff struct {
	Base BatchRef `json:"base"`
	New  BatchRef `json:"new"`
	// FailOn is the policy in words; Failing the regressions it fails on, which make the
	// command exit 1.
	FailOn  string   `json:"fail_on"`
	Failing []string `json:"failing"`
	verdicts.Comparison
}

// BatchRef names one side of a diff.
type BatchRef struct {
	Tenant  string `json:"tenant"`
	BatchID string `json:"batch_id"`
	Source  string `json:"source,omitempty"`
	// From is where its results were read: a results.json path, or the state.
	From string `json:"from"`
}

// NewDiff compares base's rows with next's under p.
func NewDiff(base, next BatchRef, c verdicts.Comparison, p verdicts.Policy) Diff {
	d := Diff{Base: base, New: next, FailOn: p.String(), Comparison: c, Failing: []string{}}
	for _, e := range c.Failing(p) {
		d.Failing = append(d.Failing, e.ACID)
	}
	if d.Entries == nil {
		d.Entries = []verdicts.Entry{}
	}
	return d
}

// sideText is one side of an entry: "block (reference) 0.03", "-" when absent.
func sideText(s *verdicts.Side) string {
	if s == nil {
		return "-"
	}
	out := string(s.Grade)
	if s.Outcome != "" && s.Outcome != string(s.Grade) {
		out += " (" + s.Outcome + ")"
	}
	return out
}

func scoreText(s *verdicts.Side) string {
	if s == nil || s.Score == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *s.Score)
}

// sections are the changes in the order a reader wants them.
var sections = []verdicts.Change{verdicts.Regressed, verdicts.Improved, verdicts.Added, verdicts.Removed, verdicts.Unchanged}

func (d Diff) headline() string {
	c := d.Counts
	return fmt.Sprintf("%d regressed, %d improved, %d unchanged, %d added, %d removed", c.Regressed, c.Improved, c.Unchanged, c.Added, c.Removed)
}

func (d Diff) verdict() string {
	if len(d.Failing) == 0 {
		return fmt.Sprintf("no regression fails on %s", d.FailOn)
	}
	return fmt.Sprintf("%s failing on %s: %s", plural(len(d.Failing), "regression"), d.FailOn, strings.Join(d.Failing, ", "))
}

// WriteText writes the diff as a terminal reads it: the counts, then each AC by change,
// with its grade and outcome and its score before and after.
func (d Diff) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "diff %s (base, %s) -> %s (new, %s): %s\n", d.Base.BatchID, d.Base.From, d.New.BatchID, d.New.From, d.headline())
	for _, ch := range sections {
		es := d.Of(ch)
		if len(es) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%d):\n", ch, len(es))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, e := range es {
			fmt.Fprintf(tw, "  %s\t%s\t%s -> %s\tscore %s -> %s\t%s\n", e.ACID, e.Kind, sideText(e.Base), sideText(e.New), scoreText(e.Base), scoreText(e.New), clip(oneLine(newNote(e)), 96))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", d.verdict())
	return err
}

// newNote is what explains an entry: the new side's note, else the base's.
func newNote(e verdicts.Entry) string {
	if e.New != nil && e.New.Note != "" {
		return e.New.Note
	}
	if e.Base != nil {
		return e.Base.Note
	}
	return ""
}

// WriteMarkdown writes the diff for a pull-request comment: the counts and the verdict,
// a table of the regressions and improvements, and the rest folded away.
func (d Diff) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### tribunal diff: `%s` → `%s`\n\n", d.Base.BatchID, d.New.BatchID)
	fmt.Fprintf(&b, "%s. ", d.headline())
	if len(d.Failing) > 0 {
		fmt.Fprintf(&b, "**%s**.\n\n", d.verdict())
	} else {
		fmt.Fprintf(&b, "%s.\n\n", d.verdict())
	}
	table := func(es []verdicts.Entry) {
		b.WriteString("| AC | kind | change | base | new | score | note |\n|---|---|---|---|---|---|---|\n")
		for i, e := range es {
			if i == maxSummaryRows {
				fmt.Fprintf(&b, "\n%s more not shown: `tribunal diff --json` lists every one.\n", plural(len(es)-i, "AC"))
				break
			}
			change := string(e.Change)
			if e.Change == verdicts.Regressed {
				change = "**regressed**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s → %s | %s |\n", cell(e.ACID), cell(e.Kind), change, cell(sideText(e.Base)), cell(sideText(e.New)),
				scoreText(e.Base), scoreText(e.New), cell(newNote(e)))
		}
		b.WriteString("\n")
	}
	var head, rest []verdicts.Entry
	for _, ch := range sections {
		if ch == verdicts.Regressed || ch == verdicts.Improved {
			head = append(head, d.Of(ch)...)
		} else {
			rest = append(rest, d.Of(ch)...)
		}
	}
	if len(head) > 0 {
		table(head)
	}
	if len(rest) > 0 {
		fmt.Fprintf(&b, "<details><summary>%s added, removed or unchanged</summary>\n\n", plural(len(rest), "AC"))
		table(rest)
		b.WriteString("</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
