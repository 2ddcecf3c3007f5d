//go:build chaosbroken

package chaos

// This package's tests are running on the deliberately broken build (the chaosbroken
// tag, see services/aggregator/stale_broken.go): TestClusterPartitions must fail here, as
// TestClusterPartitionsCatchesStaleDecisions checks from the real build.
