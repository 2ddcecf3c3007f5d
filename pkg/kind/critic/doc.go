// Package critic holds the deterministic half of the `critic` judge kind: an absolute
// score of one task's output on correctness, slop and scope (whole numbers 0-10).
//
// The judge only supplies the three scores and a rationale. The quality value and the
// pass / revise / reject verdict are derived here by Derive, from the scores alone, so
// that the aggregator and any reviewer get the same verdict without trusting a model's
// arithmetic. If the judge also states a verdict or quality, Check compares those claims
// with the derivation and counts the disagreements, which makes a judge that cannot
// apply its own rubric visible.
//
// Like pkg/ab and pkg/equivalence, the package does no I/O, reads no clock and uses no
// randomness.
package critic
