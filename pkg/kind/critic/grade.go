package critic

import "github.com/tribunal-dev/tribunal/pkg/kind"

var _ kind.Grading = Kind{}

// GradeRow implements kind.Grading: pass is clean, revise fix, reject block.
func (Kind) GradeRow(r kind.Row) (string, bool) {
	switch r.Verdict {
	case VerdictPass:
		return "clean", true
	case VerdictReject:
		return "block", true
	case VerdictRevise:
		return "fix", true
	}
	return "", false
}

// ScoreRow implements kind.Grading: the quality / 10.
func (Kind) ScoreRow(r kind.Row) (float64, bool) {
	if r.Quality == nil {
		return 0, false
	}
	return float64(*r.Quality) / 10, true
}
