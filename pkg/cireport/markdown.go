package cireport

import (
	"fmt"
	"io"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// maxCell bounds a Markdown table cell: GitHub caps a step summary at 1 MiB and a comment
// at 65,536 characters, and a reason is read in full on the AC's page.
const maxCell = 200

// maxSummaryRows bounds the rows of the summary's table of ACs that are not clean; the
// rest are counted under it.
const maxSummaryRows = 200

// cell makes s safe inside a Markdown table cell: one line, pipes escaped, HTML's
// brackets as entities (a reason quoting a page must not become markup).
func cell(s string) string {
	s = clip(oneLine(s), maxCell)
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// link is a Markdown link to target named name, or name alone without a target.
func link(name, target string) string {
	if target == "" {
		return name
	}
	return "[" + name + "](" + strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29").Replace(target) + ")"
}

// WriteMarkdown writes a summary of res for a person on a CI page: the counts and the
// exit code, a table of every AC that is not clean (failing first, then findings the
// policy lets pass) with its kind, grade, result, reason and page, and the clean ACs
// folded away.
func WriteMarkdown(w io.Writer, res *client.Results, o Options) error {
	c := count(res, o.Policy)
	s := res.Summary
	var b strings.Builder
	fmt.Fprintf(&b, "## tribunal: batch `%s` (tenant %s)\n\n", res.BatchID, res.Tenant)
	fmt.Fprintf(&b, "%s: %d compared, %d blocked, %s, %s; exit code %d.\n\n",
		plural(len(res.Rows), "AC"), s.Compared, s.Blocked, plural(s.Violations, "schema violation"), plural(c.findings, "finding"), s.ExitCode)
	fmt.Fprintf(&b, "Fails on: %s. **%s failing** (%d findings as failures, %d blocked or schema violations as errors).\n\n",
		o.Policy, plural(c.failures+c.errors, "AC"), c.failures, c.errors)
	var failing, passing, clean []int
	for i := range res.Rows {
		switch g := c.grades[i]; {
		case o.Policy.Fails(g):
			failing = append(failing, i)
		case g != verdicts.Clean:
			passing = append(passing, i)
		default:
			clean = append(clean, i)
		}
	}
	if len(failing)+len(passing) > 0 {
		b.WriteString("| AC | kind | grade | result | reason | page |\n|---|---|---|---|---|---|\n")
		shown := 0
		for _, group := range [][]int{failing, passing} {
			for _, i := range group {
				if shown == maxSummaryRows {
					break
				}
				shown++
				r := res.Rows[i]
				grade := "**" + string(c.grades[i]) + "**"
				if !o.Policy.Fails(c.grades[i]) {
					grade = string(c.grades[i]) + " (not failing)"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(r.ACID), cell(r.Kind), grade, cell(result(r)), cell(note(r)), link("page", o.page(r.ACID)))
			}
		}
		if more := len(failing) + len(passing) - shown; more > 0 {
			fmt.Fprintf(&b, "\n%s more not shown: results.json and the batch's page list them.\n", plural(more, "AC"))
		}
		b.WriteString("\n")
	}
	if len(clean) > 0 {
		fmt.Fprintf(&b, "<details><summary>%s clean</summary>\n\n", plural(len(clean), "AC"))
		for _, i := range clean {
			r := res.Rows[i]
			fmt.Fprintf(&b, "- %s (%s): %s\n", link(cell(r.ACID), o.page(r.ACID)), cell(r.Kind), cell(result(r)))
		}
		b.WriteString("\n</details>\n\n")
	}
	for _, j := range res.Judges {
		fmt.Fprintf(&b, "Verdicts by judge `%s`", j)
		if strings.HasPrefix(j, "scripted/") {
			b.WriteString(" (scripted: recorded answers, no model was asked)")
		}
		b.WriteString(".\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
