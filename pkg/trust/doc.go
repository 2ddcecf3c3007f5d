// Package trust computes the figures that tell a team how far to trust its judges, from
// plain records of what the judges answered: outcome rates with intervals, position bias
// and swap flips, agreement within a panel, sensitivity to length, agreement with people's
// HE-2 spot checks, and what the calls cost.
//
// It does no I/O and knows no events: `tribunal report` builds the inputs (Judgment,
// Outcome, Call, SpotCheck) from a batch's stored events and renders what BuildReport
// returns; `tribunal calibrate` (package calibration) reuses the same figures. The
// arithmetic lives in package stats. docs/judging.md explains every figure and how to act
// on it.
package trust
