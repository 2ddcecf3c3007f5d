//go:build !chaosbroken

package aggregator

// staleDecisions is false in every real build: an aggregator whose reads or writes the
// cluster cannot answer for the moment (a partition, an election) hands the message back
// and tries again, deciding only on what the majority stored. The chaos suite's
// deliberately broken build (the chaosbroken tag, stale_broken.go) turns it on to show
// that the partition test fails when an aggregator cut off from the majority decides.
const staleDecisions = false
