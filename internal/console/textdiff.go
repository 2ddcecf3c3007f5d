package console

import (
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// The side-by-side diff of a text artifact against its reference, for reviewers only: it
// is computed here, on the console's page, from the two artifacts as stored. No judge is
// ever shown a diff (judges get the two artifacts in blind slots).

// maxDiffRows bounds a diff's rows on a page; the artifacts stay one link away.
const maxDiffRows = 4000

// diffRow is one line of the diff: in both (same), in ours only (del), in the reference
// only (add), or a line of ours facing the reference's line it became (change).
type diffRow struct {
	Op      string `json:"op"`
	Left    string `json:"left,omitempty"`
	Right   string `json:"right,omitempty"`
	LeftNo  int    `json:"left_no,omitempty"`
	RightNo int    `json:"right_no,omitempty"`
}

// textDiff is ours (left) against the reference (right), line by line.
type textDiff struct {
	Rows      []diffRow `json:"rows"`
	Same      bool      `json:"same"`
	Removed   int       `json:"removed"`
	Added     int       `json:"added"`
	Truncated bool      `json:"truncated,omitempty"`
}

// sideBySide diffs two texts by line (diff-match-patch's line mode, on go-diff).
func sideBySide(ours, reference string) *textDiff {
	dmp := diffmatchpatch.New()
	a, b, lines := dmp.DiffLinesToChars(ours, reference)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(a, b, false), lines)
	d := &textDiff{Same: ours == reference}
	left, right := 0, 0
	var dels []string
	emit := func(r diffRow) bool {
		if len(d.Rows) >= maxDiffRows {
			d.Truncated = true
			return false
		}
		d.Rows = append(d.Rows, r)
		return true
	}
	flush := func(adds []string) {
		n := max(len(dels), len(adds))
		for i := 0; i < n; i++ {
			r := diffRow{}
			if i < len(dels) {
				left++
				r.Left, r.LeftNo = dels[i], left
			}
			if i < len(adds) {
				right++
				r.Right, r.RightNo = adds[i], right
			}
			switch {
			case i < len(dels) && i < len(adds):
				r.Op = "change"
			case i < len(dels):
				r.Op = "del"
			default:
				r.Op = "add"
			}
			if !emit(r) {
				return
			}
		}
		dels = nil
	}
	for _, df := range diffs {
		ls := splitLines(df.Text)
		switch df.Type {
		case diffmatchpatch.DiffDelete:
			d.Removed += len(ls)
			dels = append(dels, ls...)
		case diffmatchpatch.DiffInsert:
			d.Added += len(ls)
			flush(ls)
		default:
			flush(nil)
			for _, l := range ls {
				left++
				right++
				if !emit(diffRow{Op: "same", Left: l, Right: l, LeftNo: left, RightNo: right}) {
					break
				}
			}
		}
	}
	flush(nil)
	return d
}

// splitLines cuts text into lines without their line ends.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
