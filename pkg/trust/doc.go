// Package trust computes the figures that tell a team how far to trust its judges, from
// plain records of what the judges answered: outcome rates with intervals, position bias
// and swap flips, agreement within a panel, sensitivity to length, agreement with people's
// HE-2 spot checks, and what the calls cost.
//
// It is a generic room, and names no kind: each kind supplies its part of the figures
// through the interfaces in kinds.go, which its rules implement (pkg/kind/<name>) and
// package collect finds through the kinds' registration (kind.Lookup). A kind whose judge
// compares our artifact with a reference in two blind slots (ab) is Pairwise and supplies
// the outcomes and judgments; one whose verdicts grade named dimensions (rubric) is
// Dimensioned; every kind that asks a judge supplies its calls (kind.Calling, or
// JudgeCalling when some of its calls are not its judge's), for the costs.
//
// It does no I/O: `tribunal report` builds the inputs (Judgment, Outcome, Call,
// SpotCheck) from a batch's stored events (package collect) and renders what BuildReport
// returns; ab's `tribunal calibrate` reuses the same figures. The arithmetic lives in
// package stats. docs/judging.md explains every figure and how to act on it.
package trust
