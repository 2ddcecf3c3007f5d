package equivalence

import "github.com/tribunal-dev/tribunal/pkg/kind"

var _ kind.Grading = Kind{}

// GradeRow implements kind.Grading: pass is clean; fail (a case regressed) is block.
func (Kind) GradeRow(r kind.Row) (string, bool) {
	switch r.Verdict {
	case "pass":
		return "clean", true
	case "fail":
		return "block", true
	}
	return "", false
}

// ScoreRow implements kind.Grading: 1 for pass, 0 for fail.
func (Kind) ScoreRow(r kind.Row) (float64, bool) {
	switch r.Verdict {
	case "pass":
		return 1, true
	case "fail":
		return 0, true
	}
	return 0, false
}

var _ kind.Summarizing = Kind{}

// JudgesSummary implements kind.Summarizing: one judge call per case.
func (Kind) JudgesSummary(_ int, e kind.Estimate) string { return kind.Count(e.Cases, "case") }
