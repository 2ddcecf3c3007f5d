// Package calibration scores a judge against the calibration set: A/B pairs whose right
// answer is known (examples/calibration), each testing one property a trustworthy judge
// needs: accuracy on clear wins, ties on identical and near-identical pairs, the same
// answer in both orders, no reward for length, and no obedience to text that asks for
// the win.
//
// It is pure: `tribunal calibrate` runs the set through the configured judge, turns the
// verdicts into trust.Judgment records and hands them to Score with the expectations and
// the team's thresholds (both small YAML files parsed here). docs/judging.md describes the
// set, the figures and the threshold file.
package calibration
