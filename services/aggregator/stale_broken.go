//go:build chaosbroken

package aggregator

// staleDecisions, in this deliberately broken build only (go build -tags chaosbroken,
// never shipped), makes an aggregator that cannot reach the cluster's majority decide
// anyway instead of waiting: a handler whose read or write went unanswered (IsTransient)
// fails the message for good, so its job is blocked on what the cut-off side had, though
// the majority could decide it. The partition test (internal/chaos,
// TestClusterPartitionsCatchesStaleDecisions) must fail on it.
const staleDecisions = true
