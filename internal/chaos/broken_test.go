//go:build !chaosbroken

package chaos

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestClusterPartitionsCatchesStaleDecisions: the partition test fails on a deliberately
// broken build (the chaosbroken tag, services/aggregator/stale_broken.go: an aggregator
// that was cut off from the majority decides on what it held then, failing the next inputs
// it handles for good so their jobs are blocked on what the cut-off side had). It runs
// TestClusterPartitions under that tag as a go test of its own and wants it to fail on
// its checks (not to fail to build, nor to skip). Like the partition test it runs only
// with TRIBUNAL_PARTITIONS=1.
func TestClusterPartitionsCatchesStaleDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the partition test on a broken build")
	}
	if os.Getenv("TRIBUNAL_PARTITIONS") != "1" {
		t.Skip("partition test on a broken build: runs with the partition test; set TRIBUNAL_PARTITIONS=1 to run it here")
	}
	// The broken build decides stale only when a cut meets one of the cut-off
	// aggregator's reads or writes in flight; when its inputs were all handled before the
	// cut (the judges run ahead of it), it has nothing to decide stale and the run passes.
	// A decision it took stale blocks a job, which the partition test fails on, so a run
	// that passes shows nothing either way: it is tried again, up to brokenTries times.
	const brokenTries = 3
	var log string
	var err error
	for try := 1; ; try++ {
		cmd := exec.Command("go", "test", "-tags", "chaosbroken", "-count=1", "-v", "-run", "^TestClusterPartitions$", ".")
		cmd.Env = append(os.Environ(), "TRIBUNAL_PARTITIONS=1")
		var out []byte
		out, err = cmd.CombinedOutput()
		log = string(out)
		if err != nil {
			break
		}
		if try == brokenTries {
			t.Fatalf("TestClusterPartitions passed on the broken build %d times in a row (stale decisions allowed, or never met by a cut):\n%s", brokenTries, tailOf(log, 4000))
		}
		t.Logf("TestClusterPartitions passed on the broken build, try %d of %d: its cut-off aggregator had nothing in hand to decide stale; trying again", try, brokenTries)
	}
	switch {
	case strings.Contains(log, "--- SKIP: TestClusterPartitions"):
		t.Fatalf("TestClusterPartitions skipped on the broken build:\n%s", tailOf(log, 2000))
	case !strings.Contains(log, "--- FAIL: TestClusterPartitions"):
		t.Fatalf("the broken build's partition test did not run to a failure (%v):\n%s", err, tailOf(log, 4000))
	}
	t.Logf("TestClusterPartitions failed on the broken build, as it must (%d decisions taken on what a cut-off aggregator held); its failure:\n%s",
		strings.Count(log, "chaosbroken: decided on what it held while cut off"), failureLines(log))
}

// failureLines are the lines of a go test log that say why a test failed.
func failureLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "partition_test.go") || strings.HasPrefix(l, "--- FAIL") {
			out = append(out, l)
		}
	}
	return tailOf(strings.Join(out, "\n"), 3000)
}
