package records_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestEachJobReadsOnACurrentMember: on a three-member cluster with the buckets at three
// replicas, every scan reads through a consumer on a member whose store holds every
// record as decided: the jobs stream's leader, or one the leader reports current with
// nothing to catch up. The server places a one-replica consumer on any member, lagging
// or not (a batch completed with jobs as pending, TestClusterPartitions, which slows a
// member's links for real); here each placement is checked against the leader's word
// and the records read whole.
func TestEachJobReadsOnACurrentMember(t *testing.T) {
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
	type placed struct {
		consumer, leader string
		current          bool
	}
	var tries []placed
	records.SetScanPlaced(t.Cleanup, func(consumer, leader string, current bool) {
		tries = append(tries, placed{consumer, leader, current})
	})
	for range 8 {
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
			if p.consumer == p.leader && !p.current {
				t.Fatalf("a consumer on the leader %s taken as behind it", p.leader)
			}
		}
		if last := tries[len(tries)-1]; !last.current {
			t.Fatalf("the scan read through a consumer on %s, which the leader %s does not report current (tries %v)", last.consumer, last.leader, tries)
		}
		poll.Until(t, 10*time.Second, "the scan's consumers are deleted", func() (bool, string) {
			left := scanConsumers(t, js)
			return len(left) == 0, fmt.Sprint("left: ", left)
		})
	}
}
