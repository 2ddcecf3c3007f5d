package bus_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// TestProvisionScalesToReplicas: on a three-node cluster, provisioning with Replicas 3
// over an existing R1 deployment scales the stream, every key-value bucket and every
// durable to three replicas, keeping the stored events; a second call changes nothing.
func TestProvisionScalesToReplicas(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx := ctxT(t)
	if err := bus.Provision(ctx, js, bus.Config{}); err != nil {
		t.Fatalf("provision R1: %v", err)
	}
	if err := bus.NewPublisher(js).PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "team-a.b.AC-1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if err := bus.Provision(ctx, js, bus.Config{Replicas: 3}); err != nil {
			t.Fatalf("provision R3 (round %d): %v", round, err)
		}
		// Scaling is carried out by the cluster after the update is accepted: poll.
		poll.Until(t, 30*time.Second, "every stream, bucket and durable on three replicas", func() (bool, string) {
			return replicated(ctx, js)
		})
	}
	if e, err := kv.Get(ctx, "team-a.b.AC-1"); err != nil || string(e.Value()) != "{}" {
		t.Fatalf("job record after scaling: %v", err)
	}
}

// replicated reports whether the event stream, the four buckets and every durable run
// with a leader and two replicas, and the stored event is still there.
func replicated(ctx context.Context, js jetstream.JetStream) (bool, string) {
	for _, name := range []string{"TRIBUNAL", "KV_" + bus.BucketJobs, "KV_" + bus.BucketBatches, "KV_" + bus.BucketCache, "KV_" + bus.BucketViews} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return false, fmt.Sprintf("stream %s: %v", name, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return false, fmt.Sprintf("stream %s: %v", name, err)
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return false, fmt.Sprintf("stream %s: config replicas %d, cluster %+v", name, info.Config.Replicas, info.Cluster)
		}
		if name == "TRIBUNAL" && info.State.Msgs != 1 {
			return false, fmt.Sprintf("%d events in the stream, want the 1 published before scaling", info.State.Msgs)
		}
		if name != "TRIBUNAL" {
			continue
		}
		for _, svc := range bus.Services {
			cons, err := st.Consumer(ctx, bus.ConsumerName(svc))
			if err != nil {
				return false, fmt.Sprintf("consumer %s: %v", bus.ConsumerName(svc), err)
			}
			ci, err := cons.Info(ctx)
			if err != nil {
				return false, fmt.Sprintf("consumer %s: %v", bus.ConsumerName(svc), err)
			}
			if ci.Cluster == nil || ci.Cluster.Leader == "" || len(ci.Cluster.Replicas) != 2 {
				return false, fmt.Sprintf("consumer %s: cluster %+v", ci.Name, ci.Cluster)
			}
		}
	}
	return true, ""
}

// TestProvisionReplicasNeedCluster: a standalone server cannot hold three replicas, and
// Provision says so and what to do instead of passing on the server's bare refusal.
func TestProvisionReplicasNeedCluster(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	err := bus.Provision(ctxT(t), js, bus.Config{Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "needs a JetStream cluster") || !strings.Contains(err.Error(), "--replicas 1") {
		t.Fatalf("provision R3 on a standalone server: %v, want an error naming the cluster it needs", err)
	}
	if err := bus.Provision(ctxT(t), js, bus.Config{Replicas: 9}); err == nil || !strings.Contains(err.Error(), "replicas 9") {
		t.Fatalf("provision R9: %v, want a range error", err)
	}
}

// TestProvisionReplicasMoreThanServers: three replicas on a two-node cluster are refused
// with the number of servers they need.
func TestProvisionReplicasMoreThanServers(t *testing.T) {
	_, js := natstest.StartCluster(t, 2).Connect(t)
	err := bus.Provision(ctxT(t), js, bus.Config{Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "needs at least 3 JetStream servers") {
		t.Fatalf("provision R3 on two servers: %v, want an error naming the servers it needs", err)
	}
}

// TestIsConflictReplicated: a replicated bucket refuses a compare-and-set on a key that
// another write is still replicating with another error code than a lost race on a single
// server; both are conflicts, so the aggregator's compare-and-set loops reload and retry
// instead of failing the event. Concurrent writers to one key (the shards of a batch)
// hit it at once.
func TestIsConflictReplicated(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx := ctxT(t)
	if err := bus.Provision(ctx, js, bus.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	bucket, err := js.KeyValue(ctx, bus.BucketBatches)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Create(ctx, "counter", []byte("0")); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 10
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				for {
					e, err := bucket.Get(ctx, "counter")
					if err != nil {
						errs <- err
						return
					}
					n, _ := strconv.Atoi(string(e.Value()))
					_, err = bucket.Update(ctx, "counter", []byte(strconv.Itoa(n+1)), e.Revision())
					if err == nil {
						break
					}
					if !kv.IsConflict(err) {
						errs <- fmt.Errorf("compare-and-set failed with a non-conflict: %w", err)
						return
					}
					conflicts.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e, err := bucket.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != strconv.Itoa(writers*each) {
		t.Fatalf("counter %s after %d increments", e.Value(), writers*each)
	}
	if _, err := bucket.Create(ctx, "counter", []byte("x")); err == nil || !kv.IsConflict(err) {
		t.Fatalf("create of an existing key on R3: %v; IsConflict false", err)
	}
	if kv.IsConflict(errors.New("nats: timeout")) {
		t.Fatal("a timeout is not a conflict")
	}
	t.Logf("%d conflicts retried", conflicts.Load())
}

// TestStartEmbeddedClusterChecks: a cluster member is refused before it starts when it
// lacks what JetStream clustering needs, with the flag to set.
func TestStartEmbeddedClusterChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    natsserver.Options
		want string
	}{
		{"no server name", natsserver.Options{ClusterListen: "127.0.0.1:6222", Routes: []string{"nats://127.0.0.1:6223"}}, "--server-name"},
		{"routes without a cluster address", natsserver.Options{ServerName: "n1", Routes: []string{"nats://127.0.0.1:6223"}}, "--cluster-listen"},
		{"route without a port", natsserver.Options{ServerName: "n1", ClusterListen: "127.0.0.1:6222", Routes: []string{"nats://127.0.0.1"}}, `route "nats://127.0.0.1"`},
		{"route of another scheme", natsserver.Options{ServerName: "n1", ClusterListen: "127.0.0.1:6222", Routes: []string{"http://127.0.0.1:6223"}}, "want nats://host:port"},
		{"bad cluster address", natsserver.Options{ServerName: "n1", ClusterListen: "127.0.0.1"}, `"127.0.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.StoreDir = t.TempDir()
			ns, err := natsserver.Start(tc.o)
			if err == nil {
				ns.Shutdown()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestProvisionConcurrentCluster: four services starting together on a fresh cluster
// provision at once. The cluster answers only the first of several identical
// stream creations in flight; the others must be asked again, not waited on until the
// start-up deadline.
func TestProvisionConcurrentCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		_, js := c.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if errs[i] = bus.Provision(ctx, js, bus.Config{Replicas: 3}); errs[i] == nil {
				_, errs[i] = bus.OpenBuckets(ctx, js)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("provision %d: %v", i, err)
		}
	}
}

// TestIsTransient: what a cluster electing a leader returns is transient; a refusal
// that no retry changes is not.
func TestIsTransient(t *testing.T) {
	for _, err := range []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders, nats.ErrDisconnected,
		fmt.Errorf("load job k: %w", nats.ErrNoResponders),
		&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"},
		// A fresh cluster's meta leader that has not yet heard from a member.
		fmt.Errorf("provision bucket: %w", &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"})} {
		if !bus.IsTransient(err) {
			t.Errorf("%v: not transient", err)
		}
	}
	for _, err := range []error{errors.New("boom"), jetstream.ErrKeyNotFound, context.Canceled,
		&jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence"},
		// Too few members for the replicas: no wait changes that.
		&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}} {
		if bus.IsTransient(err) {
			t.Errorf("%v: transient", err)
		}
	}
}

// TestPublishRidesOutLeaderLoss: a publish while the stream has no leader (two of three
// servers down) is not acked; the publisher sends it again under the same id until a
// leader stores it, within its timeout, and the stream holds it once.
func TestPublishRidesOutLeaderLoss(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	nc, err := nats.Connect(c.URLs, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := bus.Provision(ctx, js, bus.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	if err := pub.PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	c.Stop(1)
	ev := renderEvent("AC-2")
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- pub.PublishEvents(ev) }()
	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("publish without a stream leader returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
	default:
	}
	c.Start(t, 0)
	c.Start(t, 1)
	if err := <-done; err != nil {
		t.Fatalf("publish across the leader loss: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
	}
	c.WaitReady(t)
	st, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("%d events stored, want 2 (AC-1 and AC-2 once)", info.State.Msgs)
	}
	t.Logf("published %s after %s", ev.ID, time.Since(start).Round(time.Millisecond))
}

// TestStartEmbeddedPortTaken: a listen address already in use is natsserver.Start's error
// at once, naming it, instead of a server that never becomes ready.
func TestStartEmbeddedPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, o := range []natsserver.Options{
		{StoreDir: t.TempDir(), Listen: l.Addr().String()},
		{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1", ServerName: "n1", ClusterListen: l.Addr().String(), Routes: []string{"nats://127.0.0.1:1"}},
	} {
		start := time.Now()
		ns, err := natsserver.Start(o)
		if err == nil {
			ns.Shutdown()
			t.Fatalf("%+v: started on a taken port", o)
		}
		if !strings.Contains(err.Error(), "listening") || time.Since(start) > 20*time.Second {
			t.Fatalf("%+v: %v after %s, want the listen error at once", o, err, time.Since(start))
		}
	}
}

// TestLeaseReplicatedAndNeverFatal: on a cluster the lease bucket has the configured
// replicas, so losing one server keeps the elections; where the bucket cannot be placed
// (two servers for three replicas) Elect still returns, the lease simply not held, so a
// service starts whatever state its backlog metric's election is in.
func TestLeaseReplicatedAndNeverFatal(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	l, err := bus.Elect(ctxT(t), js, bus.LeaseConfig{Key: "pending.judge", Holder: "a", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	// A freshly formed cluster may leave the first request unanswered; a lone contender
	// holds the lease at the latest at its next attempt.
	for deadline := time.Now().Add(30 * time.Second); !l.Held(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a lone contender does not hold the lease")
		}
	}
	kv, err := js.KeyValue(ctxT(t), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if r := st.(interface{ StreamInfo() *jetstream.StreamInfo }).StreamInfo().Config.Replicas; r != 3 {
		t.Fatalf("lease bucket has %d replicas, want 3", r)
	}

	_, js2 := natstest.StartCluster(t, 2).Connect(t)
	l2, err := bus.Elect(ctxT(t), js2, bus.LeaseConfig{Key: "pending.judge", Holder: "b", Replicas: 3})
	if err != nil {
		t.Fatalf("an unplaceable lease bucket stopped the election: %v", err)
	}
	t.Cleanup(l2.Close)
	if l2.Held() {
		t.Fatal("a lease without its bucket is held")
	}
}

// TestReadStreamOutlivesItsServer: a reader's consumer is R1 and in memory, so on an R3
// stream it lives on one member only; that member lost mid-read, the read goes on with a
// new consumer on a member still up, after the last message it delivered: every message
// once, in order. (The read is the audit's, nothing durable: replicating
// its consumer would cost a raft group per read.)
func TestReadStreamOutlivesItsServer(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		if _, err := js.Publish(ctx, "tribunal.team-a.job.submitted", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	stopped, at := "", time.Time{}
	err := bus.ReadStream(ctx, js, "TRIBUNAL", bus.ReadOptions{Batch: 256}, func(_ jetstream.Msg, md *jetstream.MsgMetadata) bool {
		seqs = append(seqs, md.Sequence.Stream)
		if md.Sequence.Stream == 700 {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			cons, err := js.Consumer(ictx, "TRIBUNAL", md.Consumer)
			if err != nil {
				t.Errorf("the reader's consumer %s: %v", md.Consumer, err)
				return false
			}
			info := cons.CachedInfo()
			if info.Cluster == nil || info.Cluster.Leader == "" {
				t.Errorf("the reader's consumer %s has no server: %+v", md.Consumer, info.Cluster)
				return false
			}
			for i, ns := range c.Servers {
				if ns.Name() == info.Cluster.Leader {
					c.Stop(i)
					stopped, at = ns.Name(), time.Now()
				}
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("read after %s stopped: %v", stopped, err)
	}
	if stopped == "" {
		t.Fatal("the reader's consumer's server was not found")
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("delivery %d is message %d (%d delivered; %s stopped at 700)", i, s, len(seqs), stopped)
		}
	}
	if len(seqs) != n {
		t.Errorf("%d messages delivered, want %d", len(seqs), n)
	}
	t.Logf("the read went on after its consumer's server %s stopped and ended %s later", stopped, time.Since(at).Round(time.Millisecond))
}
