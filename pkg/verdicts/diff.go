package verdicts

import (
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// Change is what became of one AC between a base batch and a new one.
type Change string

const (
	// Regressed: the AC's grade got worse (clean to polish, fix to block, a verdict to
	// blocked, ...).
	Regressed Change = "regressed"
	// Improved: its grade got better.
	Improved Change = "improved"
	// Unchanged: the same grade; its outcome or score may still have moved, and the
	// entry says from what to what.
	Unchanged Change = "unchanged"
	// Added: the AC is in the new batch only.
	Added Change = "added"
	// Removed: the AC is in the base batch only.
	Removed Change = "removed"
)

// Side is one AC's result in one batch of a comparison.
type Side struct {
	Grade   Grade    `json:"grade"`
	Outcome string   `json:"outcome"`
	Score   *float64 `json:"score,omitempty"`
	Status  string   `json:"status"`
	// Note is the judge's biggest gap, the kind's detail or the blocked reason.
	Note string `json:"note,omitempty"`
}

// SideOf is a row's side of a comparison.
func SideOf(r kind.Row) Side {
	note := r.BiggestGap
	if r.Detail != "" {
		note = r.Detail
	}
	if r.Reason != "" {
		note = r.Reason
	}
	return Side{Grade: GradeOf(r), Outcome: OutcomeOf(r), Score: ScoreOf(r), Status: r.Status, Note: note}
}

// Entry is one AC of a comparison. Base is nil for an added AC, New for a removed one.
type Entry struct {
	ACID   string `json:"ac_id"`
	Kind   string `json:"kind"`
	Change Change `json:"change"`
	Base   *Side  `json:"base,omitempty"`
	New    *Side  `json:"new,omitempty"`
}

// Moved reports whether an unchanged entry's outcome or score moved all the same.
func (e Entry) Moved() bool {
	if e.Base == nil || e.New == nil {
		return false
	}
	if e.Base.Outcome != e.New.Outcome || e.Base.Status != e.New.Status {
		return true
	}
	b, n := e.Base.Score, e.New.Score
	return (b == nil) != (n == nil) || b != nil && *b != *n
}

// Counts counts a comparison's entries by change.
type Counts struct {
	Regressed int `json:"regressed"`
	Improved  int `json:"improved"`
	Unchanged int `json:"unchanged"`
	Added     int `json:"added"`
	Removed   int `json:"removed"`
}

// Comparison is two batches' results joined on their AC ids.
type Comparison struct {
	Counts Counts `json:"counts"`
	// Entries are the new batch's ACs in its order, then the ACs only the base holds in
	// the base's order.
	Entries []Entry `json:"entries"`
}

// Compare joins the rows of a base batch and a new one on their AC ids and says, for each
// AC, whether its grade regressed, improved or stayed (GradeOf and Rank are the rule).
func Compare(base, next []kind.Row) Comparison {
	prev := make(map[string]int, len(base))
	for i, r := range base {
		prev[r.ACID] = i
	}
	seen := make(map[string]bool, len(next))
	var c Comparison
	for _, r := range next {
		seen[r.ACID] = true
		n := SideOf(r)
		e := Entry{ACID: r.ACID, Kind: r.Kind, New: &n}
		i, ok := prev[r.ACID]
		if !ok {
			e.Change = Added
			c.Counts.Added++
			c.Entries = append(c.Entries, e)
			continue
		}
		b := SideOf(base[i])
		e.Base = &b
		switch br, nr := b.Grade.Rank(), n.Grade.Rank(); {
		case nr > br:
			e.Change = Regressed
			c.Counts.Regressed++
		case nr < br:
			e.Change = Improved
			c.Counts.Improved++
		default:
			e.Change = Unchanged
			c.Counts.Unchanged++
		}
		c.Entries = append(c.Entries, e)
	}
	for _, r := range base {
		if !seen[r.ACID] {
			b := SideOf(r)
			c.Entries = append(c.Entries, Entry{ACID: r.ACID, Kind: r.Kind, Change: Removed, Base: &b})
			c.Counts.Removed++
		}
	}
	return c
}

// Failing are the regressions that land on a grade p fails: what makes `tribunal diff`
// exit 1. With the zero Policy every regression fails.
func (c Comparison) Failing(p Policy) []Entry {
	var out []Entry
	for _, e := range c.Entries {
		if e.Change == Regressed && p.Fails(e.New.Grade) {
			out = append(out, e)
		}
	}
	return out
}

// Of lists the entries of one change.
func (c Comparison) Of(ch Change) []Entry {
	var out []Entry
	for _, e := range c.Entries {
		if e.Change == ch {
			out = append(out, e)
		}
	}
	return out
}
