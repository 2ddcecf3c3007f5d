// Package stats holds the plain statistics tribunal reports about its judges: a proportion
// with its Wilson score interval, a seeded bootstrap interval for any statistic over items,
// quantiles, Krippendorff's alpha for nominal data and pairwise percent agreement.
//
// It knows nothing about judges, ACs or events (package trust builds the report's figures
// from those): every function takes numbers or labels and returns numbers, reads no clock
// and draws randomness only from the seed it is given, so a report recomputed from the
// same events is the same report.
//
// The reference values the tests check against come from published worked examples where
// there is one (Newcombe 1998 for Wilson intervals, Krippendorff 2011 for alpha) and
// otherwise from testdata/reference.py, an independent implementation that uses only
// Python's standard library.
package stats
