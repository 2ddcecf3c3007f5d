package bus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// TestLeaseOneHolder: of several contenders exactly one holds the lease; when it closes,
// another takes over at its next attempt, and when a holder dies without closing (it
// stops renewing), another takes over once the lease expires.
func TestLeaseOneHolder(t *testing.T) {
	ns := natstest.Start(t)
	const ttl = 600 * time.Millisecond
	var leases []*bus.Lease
	for i := range 3 {
		_, js := ns.Connect(t)
		l, err := bus.Elect(ctxT(t), js, bus.LeaseConfig{Key: "pending.judge", Holder: fmt.Sprintf("judge-%d", i), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		leases = append(leases, l)
	}
	holders := func() (n int, who int, state string) {
		who = -1
		for i, l := range leases {
			if l.Held() {
				n++
				who = i
			}
			state += fmt.Sprintf("judge-%d:%v ", i, l.Held())
		}
		return n, who, state
	}
	// The first contender holds it from the start; the others never do meanwhile.
	for range 10 {
		if n, who, state := holders(); n != 1 || who != 0 {
			t.Fatalf("holders: %s, want judge-0 alone", state)
		}
		time.Sleep(ttl / 5)
	}

	// A graceful stop hands it over.
	leases[0].Close()
	var next int
	poll.Until(t, 10*time.Second, "a new holder after a close", func() (bool, string) {
		n, who, state := holders()
		next = who
		return n == 1 && who != 0, state
	})

	// The bucket names the holder.
	_, js := ns.Connect(t)
	kv, err := js.KeyValue(ctxT(t), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctxT(t), "pending.judge")
	if err != nil || string(e.Value()) != fmt.Sprintf("judge-%d", next) {
		t.Fatalf("lease key %v %v, want held by judge-%d", e, err, next)
	}
}

// TestLeaseExpiresWithoutRenewal: a key left by a holder that died (it neither renews
// nor releases) keeps the others out until it expires, then one of them takes over.
func TestLeaseExpiresWithoutRenewal(t *testing.T) {
	ns := natstest.Start(t)
	const ttl = time.Second
	_, js := ns.Connect(t)
	first, err := bus.Elect(ctxT(t), js, bus.LeaseConfig{Key: "pending.gater", Holder: "probe", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // creates the bucket with the TTL, then releases the key
	kv, err := js.KeyValue(ctxT(t), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctxT(t), "pending.gater", []byte("crashed")); err != nil {
		t.Fatal(err)
	}
	l, err := bus.Elect(ctxT(t), js, bus.LeaseConfig{Key: "pending.gater", Holder: "alive", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Held() {
		t.Fatal("took a lease another holder still has")
	}
	poll.Until(t, 10*time.Second, "the dead holder's lease to expire", func() (bool, string) {
		return l.Held(), "not held"
	})
}
