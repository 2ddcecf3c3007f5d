// Package verdicts is what one AC's result counts for in a pipeline, read from its row
// alone (results.json, the console's index) so that it works on any machine: its grade
// (clean; a finding routed polish, fix or block; blocked; a schema violation), its score,
// the --fail-on policy that turns a batch's grades into the exit code a pipeline gates on,
// and the comparison of two batches' results AC by AC (regressed, improved, unchanged).
//
// One rule, one place: `tribunal run --fail-on`, the JUnit, Markdown and annotation
// outputs, `tribunal diff` and the console's compare page all grade and compare here.
package verdicts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// Grade is how far an AC's result is from clean, for a pipeline.
type Grade string

// The grades, from best to worst (Rank).
const (
	// Clean: nothing to do (ours won at the threshold, the critic passed, no case
	// regressed, the view signed off).
	Clean Grade = "clean"
	// Polish, Fix and Block are findings by their route: an ab suggestion's tag; a
	// critic's revise is fix and its reject block; a failed equivalence (a case
	// regressed) is block; a rubric view that needs fixes, or a report-only view, is fix.
	Polish Grade = "polish"
	Fix    Grade = "fix"
	Block  Grade = "block"
	// Blocked: no verdict could be made (a missing, unreadable or unsupported artifact, a
	// red gate that ended the loop, a spent budget, a reference image awaited).
	Blocked Grade = "blocked"
	// SchemaViolation: the judging itself broke (an answer that broke the schema, or a
	// result no rule can classify).
	SchemaViolation Grade = "schema_violation"
)

// Grades are every grade, best first.
var Grades = []Grade{Clean, Polish, Fix, Block, Blocked, SchemaViolation}

// Rank orders the grades, Clean 0 to SchemaViolation 5: a verdict lost (blocked, or an
// answer that broke the schema) ranks below any verdict, since it may hide a block.
func (g Grade) Rank() int {
	if i := slices.Index(Grades, g); i >= 0 {
		return i
	}
	return len(Grades) - 1
}

// Finding reports whether g is a finding (polish, fix or block).
func (g Grade) Finding() bool { return g == Polish || g == Fix || g == Block }

// GradeOf grades one AC's row. It reads only the row's fields, so results.json files from
// other machines and older builds grade the same way.
func GradeOf(r kind.Row) Grade {
	switch r.Status {
	case "blocked", "budget_exhausted", "needs_context":
		return Blocked
	case "schema_violation", "pending", "awaiting_spotcheck", "":
		return SchemaViolation
	case "signed_off":
		return Clean
	case "needs_fixes", "reported":
		return Fix
	}
	switch r.Tag {
	case "block":
		return Block
	case "fix":
		return Fix
	case "polish":
		return Polish
	}
	if g, ok := gradingOf(r); ok {
		if grade, ok := g.GradeRow(r); ok {
			return Grade(grade)
		}
	}
	return SchemaViolation
}

// OutcomeOf is an AC's result in a word, as the console's table shows it: the ab winner,
// the kind's verdict, or the status when there is no verdict.
func OutcomeOf(r kind.Row) string {
	switch {
	case r.Status == "blocked":
		return "blocked"
	case r.Status == "schema_violation":
		return "schema violation"
	case r.Status == "pending":
		return "pending"
	case r.Winner != "":
		return r.Winner
	case r.Verdict != "":
		return r.Verdict
	}
	return r.Status
}

// ScoreOf is an AC's score in [0, 1], higher better for ours, or nil when its kind gives
// none (kind.Grading's ScoreRow: ab's from the winner and its confidence, a critic's
// quality / 10, equivalence's 1 for pass and 0 for fail) or there is no verdict.
func ScoreOf(r kind.Row) *float64 {
	if g := GradeOf(r); g == Blocked || g == SchemaViolation {
		return nil
	}
	g, ok := gradingOf(r)
	if !ok {
		return nil
	}
	s, ok := g.ScoreRow(r)
	if !ok {
		return nil
	}
	return &s
}

// gradingOf is the row's kind's grading (kind.Grading), if it grades its rows.
func gradingOf(r kind.Row) (kind.Grading, bool) {
	k, err := kind.Lookup(events.Kind(r.Kind))
	if err != nil {
		return nil, false
	}
	g, ok := k.(kind.Grading)
	return g, ok
}

// Policy is the set of grades that fail a pipeline (--fail-on). The zero Policy was given
// no list: every grade but clean counts as failing in the reports, and the exit code is
// the batch's own (the seed's precedence: 3 schema violation, 4 all blocked, 1 findings).
type Policy struct {
	fails map[Grade]bool
}

// PolicyValues are the words --fail-on takes, for help and errors.
const PolicyValues = "block, fix, polish, blocked, schema_violation, findings (block,fix,polish), any (all of them), none"

// ParsePolicy reads a --fail-on list. "findings" stands for block, fix and polish, "any"
// for every grade but clean, "none" for no grade (the pipeline never fails on results).
// An empty list is the zero Policy.
func ParsePolicy(list []string) (Policy, error) {
	if len(list) == 0 {
		return Policy{}, nil
	}
	p := Policy{fails: map[Grade]bool{}}
	for _, w := range list {
		w = strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(strings.TrimSpace(w)), "-", "_"), " ", "_")
		switch w {
		case "findings":
			p.fails[Block], p.fails[Fix], p.fails[Polish] = true, true, true
		case "any", "all":
			for _, g := range Grades[1:] {
				p.fails[g] = true
			}
		case "none":
		case "schema", "violation", "schema_violations":
			p.fails[SchemaViolation] = true
		default:
			g := Grade(w)
			if g == Clean || !slices.Contains(Grades, g) {
				return Policy{}, fmt.Errorf("--fail-on %q: want a list of %s", w, PolicyValues)
			}
			p.fails[g] = true
		}
	}
	return p, nil
}

// Given reports whether the policy was given as a list.
func (p Policy) Given() bool { return p.fails != nil }

// Fails reports whether grade g fails the pipeline under p.
func (p Policy) Fails(g Grade) bool {
	if p.fails == nil {
		return g != Clean
	}
	return p.fails[g]
}

// String lists the failing grades ("block, blocked, schema_violation"), or says the
// batch's exit code decides.
func (p Policy) String() string {
	if p.fails == nil {
		return "the batch's exit code (any finding, blocked AC or schema violation)"
	}
	var out []string
	for _, g := range Grades {
		if p.fails[g] {
			out = append(out, string(g))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// ExitCode is the exit code of a batch's rows under p: the seed's precedence
// (kind.ExitCode) over the ACs whose grade fails, every other AC counted clean. With the
// zero Policy it is batchCode, the batch's own exit code.
func (p Policy) ExitCode(rows []kind.Row, batchCode int) int {
	if p.fails == nil {
		return batchCode
	}
	if len(rows) == 0 {
		return kind.ExitUsage
	}
	out := make([]kind.Outcome, len(rows))
	for i, r := range rows {
		switch g := GradeOf(r); {
		case !p.Fails(g):
			out[i] = kind.OutcomeClean
		case g == Blocked:
			out[i] = kind.OutcomeBlocked
		case g == SchemaViolation:
			out[i] = kind.OutcomeSchemaViolation
		default:
			out[i] = kind.OutcomeFinding
		}
	}
	return kind.ExitCode(out)
}
