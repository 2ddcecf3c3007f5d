//go:build chaosbroken

package aggregator

// staleDecisions, in this deliberately broken build only (go build -tags chaosbroken,
// never shipped), makes an aggregator that was cut off from the cluster's majority decide
// on what it held then instead of on what the majority stored: once a handler's read or
// write went unanswered (IsTransient), the next inputs it handles after the cluster
// answers again are failed for good (Service.staleDecide), so their jobs are blocked
// though the majority could decide them. The partition test (internal/chaos,
// TestClusterPartitionsCatchesStaleDecisions) must fail on it.
const staleDecisions = true
