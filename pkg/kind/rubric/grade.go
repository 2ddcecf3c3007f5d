package rubric

import "github.com/tribunal-dev/tribunal/pkg/kind"

var _ kind.Summarizing = Kind{}

// JudgesSummary implements kind.Summarizing: a judge per view.
func (Kind) JudgesSummary(jobs int, _ kind.Estimate) string { return kind.Count(jobs, "view") }
