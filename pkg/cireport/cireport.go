// Package cireport writes a batch's results in the forms CI systems read: JUnit XML (one
// test case per AC), a Markdown summary (a GitHub step summary, a pull-request comment)
// and GitHub Actions workflow commands (annotations), and the comparison of two batches
// (tribunal diff) as text and Markdown. What fails is decided by package verdicts, the
// same rule the exit code follows.
package cireport

import (
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// Options say how a batch's results are reported.
type Options struct {
	// Policy decides which ACs fail (--fail-on); the zero Policy fails every AC that is
	// not clean.
	Policy verdicts.Policy
	// Page, when set, is the link to (or path of) an AC's page: the console's, or an
	// exported site's.
	Page func(ac string) string
	// Artifact, when set, is the path of the AC's own artifact (ours, the critic's output
	// file, the equivalence candidate, the rubric spec) relative to the repository, for
	// annotations; "" when it has none.
	Artifact func(ac string) string
}

func (o Options) page(ac string) string {
	if o.Page == nil {
		return ""
	}
	return o.Page(ac)
}

func (o Options) artifact(ac string) string {
	if o.Artifact == nil {
		return ""
	}
	return o.Artifact(ac)
}

// result is an AC's result in a few words: "reference, confidence 1.00", "pass, quality 8".
func result(r kind.Row) string {
	out := verdicts.OutcomeOf(r)
	if r.Confidence != nil {
		out += fmt.Sprintf(", confidence %.2f", *r.Confidence)
	}
	if r.Quality != nil {
		out += fmt.Sprintf(", quality %d", *r.Quality)
	}
	return out
}

// headline is an AC's grade and result in a line: "AC-1 block: reference, confidence
// 1.00", "AC-9 blocked".
func headline(r kind.Row, g verdicts.Grade) string {
	out := r.ACID + " " + string(g)
	if res := result(r); res != string(g) {
		out += ": " + res
	}
	return out
}

// note is what the AC's owner reads first: the blocked reason, else the kind's detail,
// else the judge's biggest gap with the slots it names.
func note(r kind.Row) string {
	switch {
	case r.Reason != "":
		return r.Reason
	case r.Detail != "":
		return r.Detail
	case r.BiggestGap != "" && r.Slots != "":
		return r.BiggestGap + " (" + r.Slots + ")"
	}
	return r.BiggestGap
}

// counted are a batch's rows graded, with how many fail as findings and as errors.
type counted struct {
	grades             []verdicts.Grade
	failures, errors   int
	findings, problems int
}

func count(res *client.Results, p verdicts.Policy) counted {
	c := counted{grades: make([]verdicts.Grade, len(res.Rows))}
	for i, r := range res.Rows {
		g := verdicts.GradeOf(r)
		c.grades[i] = g
		errorLike := g == verdicts.Blocked || g == verdicts.SchemaViolation
		if g.Finding() {
			c.findings++
		} else if errorLike {
			c.problems++
		}
		if !p.Fails(g) {
			continue
		}
		if errorLike {
			c.errors++
		} else {
			c.failures++
		}
	}
	return c
}

// plural is "1 AC", "2 ACs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// oneLine keeps s on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to at most n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
