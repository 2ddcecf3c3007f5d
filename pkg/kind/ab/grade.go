package ab

import (
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/kind"
)

var _ kind.Grading = Kind{}

// GradeRow implements kind.Grading: a compared row without a route is clean when ours
// won; not won by ours, it is no result the rules give.
func (Kind) GradeRow(r kind.Row) (string, bool) {
	if Winner(r.Winner) == WinnerOurs {
		return "clean", true
	}
	return "", false
}

// ScoreRow implements kind.Grading: (1 + confidence) / 2 when ours won, (1 - confidence)
// / 2 when the reference won, 0.5 for a tie.
func (Kind) ScoreRow(r kind.Row) (float64, bool) {
	if r.Confidence == nil {
		return 0, false
	}
	switch Winner(r.Winner) {
	case WinnerOurs:
		return (1 + *r.Confidence) / 2, true
	case WinnerReference:
		return (1 - *r.Confidence) / 2, true
	case WinnerTie:
		return 0.5, true
	}
	return 0, false
}

var _ kind.Summarizing = Kind{}

// JudgesSummary implements kind.Summarizing: the panel and its positions.
func (Kind) JudgesSummary(_ int, e kind.Estimate) string {
	if len(e.Judges) > 0 {
		return strings.Join(e.Judges, ",") + " (" + e.Positions + ")"
	}
	return "default (" + e.Positions + ")"
}
