package records_test

import (
	"strconv"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestEachJobReadsOnTheStreamLeader: on a three-member cluster with the buckets at three
// replicas, every scan reads through a consumer on the jobs stream's leader, whose store
// holds every record as decided. The server places a one-replica consumer on any member,
// so a scan that took the first one read a lagging member's older records a third of the
// time and more (a batch completed with jobs as pending, TestClusterPartitions): here the
// server does place some elsewhere, and each of those is given up.
func TestEachJobReadsOnTheStreamLeader(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx := t.Context()
	if err := bus.Provision(ctx, js, bus.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	b, err := bus.OpenBuckets(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	st := records.New(b)
	const n = 50
	for i := range n {
		if _, err := st.CreateJob(ctx, &records.Job{Tenant: "t", Batch: "b", ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: n}); err != nil {
			t.Fatal(err)
		}
	}
	type placed struct{ consumer, leader string }
	var tries []placed
	records.SetScanPlaced(t.Cleanup, func(consumer, leader string) { tries = append(tries, placed{consumer, leader}) })
	elsewhere := 0
	const scans = 12
	for range scans {
		tries = tries[:0]
		got := 0
		if err := st.EachJob(ctx, "t", "b", func(*records.Job) error { got++; return nil }); err != nil {
			t.Fatal(err)
		}
		if got != n || len(tries) == 0 {
			t.Fatalf("%d records, %d consumers placed", got, len(tries))
		}
		for i, p := range tries {
			if p.leader == "" || p.consumer == "" {
				t.Fatalf("consumer %d at %q, the leader %q: a cluster names both", i, p.consumer, p.leader)
			}
			if p.consumer != p.leader {
				elsewhere++
			}
		}
		if last := tries[len(tries)-1]; last.consumer != last.leader {
			t.Fatalf("the scan read through a consumer on %s; the stream's leader is %s", last.consumer, last.leader)
		}
		if left := scanConsumers(t, js); len(left) > 0 {
			t.Fatalf("consumers left behind: %v", left)
		}
	}
	if elsewhere == 0 {
		t.Fatalf("all %d scans' consumers were placed on the leader at once: this test shows nothing", scans)
	}
}
