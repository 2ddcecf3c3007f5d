package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

// natsCluster is three `tribunal serve nats` processes forming one JetStream cluster on
// loopback, each with its own store folder.
type natsCluster struct {
	procs []*proc
	// names are the servers' names (--server-name), as stream info reports its leader.
	names []string
	// urls are the client URLs, comma separated, as every service gets them.
	urls string
}

// startNATSCluster starts the cluster and waits until JetStream answers through every
// member. A port picked free can be taken before a server binds it (the machine is
// shared); a member that exits while starting has the cluster started again on other
// ports.
func startNATSCluster(tb testing.TB, n int) *natsCluster {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		c, failed := tryNATSCluster(tb, n)
		if failed == nil {
			return c
		}
		for _, p := range c.procs {
			p.kill()
		}
		if attempt == 3 || !failed.hasExited() {
			tb.Fatalf("%s: no JetStream after 60s:\n%s", failed.name, tailOf(failed.logString(), 4000))
		}
		tb.Logf("%s exited while starting, starting the cluster again:\n%s", failed.name, tailOf(failed.logString(), 1000))
	}
}

// tryNATSCluster starts n members and returns the first that did not come up, or one
// that exited: a member that exits while starting (its client port taken after it
// routed to the others) leaves the rest without a meta leader, so waiting on any other
// member must notice it.
func tryNATSCluster(tb testing.TB, n int) (*natsCluster, *proc) {
	c := &natsCluster{}
	var clients, clusterAddrs, routes []string
	for range n {
		clients = append(clients, freeport.Addr(tb))
		ca := freeport.Addr(tb)
		clusterAddrs = append(clusterAddrs, ca)
		routes = append(routes, "nats://"+ca)
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		p := &proc{name: "nats " + name, args: []string{"serve", "nats", "--listen", clients[i], "--store", tb.TempDir(),
			"--server-name", name, "--cluster-name", "chaos", "--cluster-listen", clusterAddrs[i], "--routes", strings.Join(routes, ",")}}
		p.start(tb)
		tb.Cleanup(p.kill)
		c.procs = append(c.procs, p)
		c.names = append(c.names, name)
	}
	c.urls = "nats://" + strings.Join(clients, ",nats://")
	for i, addr := range clients {
		deadline := time.Now().Add(60 * time.Second)
		for !jetStreamAnswers("nats://" + addr) {
			if p := c.exited(); p != nil {
				return c, p
			}
			if time.Now().After(deadline) {
				return c, c.procs[i]
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c, nil
}

// exited is a member whose process has ended, or nil.
func (c *natsCluster) exited() *proc {
	for _, p := range c.procs {
		if p.hasExited() {
			return p
		}
	}
	return nil
}

func jetStreamAnswers(url string) bool {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err == nil
}

// member is the process of the server with this name.
func (c *natsCluster) member(name string) *proc {
	for i, n := range c.names {
		if n == name {
			return c.procs[i]
		}
	}
	return nil
}

// clusterRun is what one batch on the cluster measured.
type clusterRun struct {
	elapsed time.Duration
	// killed is the server killed as the stream leader, and when; empty without a kill.
	killed   string
	killedAt time.Time
}

// runClusterBatch runs an n-AC batch through services processes on a three-node
// JetStream cluster with every stream and bucket replicated three times. With kill, the
// stream's leader is SIGKILLed once a tenth of the batch is judged, and restarted a few
// seconds later. It checks the outcome every run: exactly n results, none twice, every
// AC compared, exactly n verdicts in the stream and a clean `tribunal audit`.
func runClusterBatch(tb testing.TB, n int, kill bool) clusterRun {
	tb.Helper()
	began := time.Now()
	c := startNATSCluster(tb, 3)
	tb.Logf("nats cluster ready in %s", time.Since(began).Round(time.Millisecond))
	blobURL := "file://" + tb.TempDir()
	var services []*proc
	var health []string
	for _, svc := range []string{"renderer", "gater", "judge", "aggregator"} {
		h := freeport.Addr(tb)
		p := &proc{name: svc, args: []string{"serve", svc, "--nats", c.urls, "--replicas", "3", "--blob", blobURL, "--health", h,
			"--ack-wait", "5s", "--instance", svc, "--log-level", "warn"}}
		p.start(tb)
		tb.Cleanup(p.kill)
		services = append(services, p)
		health = append(health, "http://"+h+"/readyz")
	}
	dumpLogs := func() {
		for _, p := range append(services, c.procs...) {
			tb.Logf("%s log:\n%s", p.name, tailOf(p.logString(), 4000))
		}
	}
	for i, h := range health {
		if !becomesReady(h, 60*time.Second) {
			dumpLogs()
			tb.Fatalf("%s not ready after 60s", services[i].name)
		}
	}

	nc, err := nats.Connect(c.urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	checkReplicated(tb, js)
	tb.Logf("cluster and services ready in %s", time.Since(began).Round(time.Millisecond))
	dir := writeBatch(tb, n)
	var run clusterRun
	start := time.Now()
	out, err := exec.Command(binary, "submit", dir, "--nats", c.urls, "--blob", blobURL).Output()
	if err != nil {
		dumpLogs()
		tb.Fatalf("submit: %v", err)
	}
	batchID := strings.TrimSpace(string(out))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Watched from the start, as a user would: the client rides out the node loss too.
	watch := exec.CommandContext(ctx, binary, "watch", "--batch", batchID, "--nats", c.urls, "--blob", blobURL, "--json", "--quiet")
	var watchOut, watchErr strings.Builder
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	if err := watch.Start(); err != nil {
		tb.Fatal(err)
	}
	if kill {
		for got, _ := verdicts(ctx, js); got < n/10; got, _ = verdicts(ctx, js) {
			if ctx.Err() != nil {
				dumpLogs()
				tb.Fatal("the batch made no progress before the leader kill")
			}
			time.Sleep(50 * time.Millisecond)
		}
		leader := streamLeader(ctx, tb, js)
		p := c.member(leader)
		if p == nil {
			tb.Fatalf("stream leader %q is none of %v", leader, c.names)
		}
		run.killed, run.killedAt = leader, time.Now()
		p.kill()
		time.Sleep(3 * time.Second)
		p.start(tb)
	}
	err = watch.Wait()
	run.elapsed = time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		// The batch's exit code: findings (winner A is not always ours). Not a failure.
		err = nil
	}
	if ctx.Err() != nil || err != nil {
		dumpLogs()
		tb.Fatalf("watch: %v (%v)\n%s", err, ctx.Err(), watchErr.String())
	}
	checkResults(tb, []byte(watchOut.String()), n)
	if got, err := verdicts(ctx, js); got != n {
		tb.Fatalf("%d verdicts in the stream (%v), want exactly %d", got, err, n)
	}
	// The kill must have landed on a running batch, not after it.
	if completed := completedAt(ctx, tb, js, batchID); kill && !completed.After(run.killedAt) {
		tb.Fatalf("the batch completed at %s, before the leader kill at %s", completed, run.killedAt)
	}
	checked := time.Now()
	if kill {
		// The restarted server rejoins: every replica of the stream is current again.
		if state, ok := replicasCurrent(ctx, js, 90*time.Second); !ok {
			dumpLogs()
			tb.Fatalf("the stream's replicas are not all current 90s after the restart: %s", state)
		}
	}
	audit := exec.CommandContext(ctx, binary, "audit", "--batch", batchID, "--nats", c.urls, "--blob", blobURL)
	if aout, err := audit.CombinedOutput(); err != nil {
		dumpLogs()
		tb.Fatalf("tribunal audit: %v\n%s", err, tailOf(string(aout), 4000))
	}
	tb.Logf("batch %s; rejoin and audit %s", run.elapsed.Round(time.Millisecond), time.Since(checked).Round(time.Millisecond))
	return run
}

// replicasCurrent polls the event stream until it has a leader and two current
// replicas, or timeout passes; it returns the last state it saw.
func replicasCurrent(ctx context.Context, js jetstream.JetStream, timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	state := "no stream info"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := js.Stream(ictx, "TRIBUNAL")
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ictx)
		}
		cancel()
		if err != nil {
			state = err.Error()
		} else if info.Cluster != nil {
			current := 0
			state = "leader " + info.Cluster.Leader
			for _, r := range info.Cluster.Replicas {
				state += fmt.Sprintf("; %s current=%v offline=%v lag=%d", r.Name, r.Current, r.Offline, r.Lag)
				if r.Current && !r.Offline {
					current++
				}
			}
			if info.Cluster.Leader != "" && current == 2 {
				return state, true
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return state, false
}

// checkReplicated fails unless the services provisioned the event stream and every
// key-value bucket with three replicas.
func checkReplicated(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"TRIBUNAL", "KV_tribunal_jobs", "KV_tribunal_batches", "KV_tribunal_cache", "KV_tribunal_views"} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			tb.Fatalf("stream %s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			tb.Fatalf("stream %s has %d replicas, want 3", name, r)
		}
	}
}

// streamLeader is the server leading the event stream's replicas.
func streamLeader(ctx context.Context, tb testing.TB, js jetstream.JetStream) string {
	tb.Helper()
	st, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" || info.Config.Replicas != 3 {
		tb.Fatalf("stream TRIBUNAL is not a replicated stream with a leader: replicas %d, cluster %+v", info.Config.Replicas, info.Cluster)
	}
	return info.Cluster.Leader
}

// TestClusterLeaderKill: a 2,000-AC batch on a three-node JetStream cluster with the
// stream and every bucket replicated three times; the stream's leader is SIGKILLed
// mid-batch and restarted. The batch completes with exactly 2,000 results, no AC twice,
// exactly one verdict per AC in the stream and a clean audit.
func TestClusterLeaderKill(t *testing.T) {
	run := runClusterBatch(t, 2000, true)
	t.Logf("batch of 2,000 in %s; killed the stream leader %s", run.elapsed.Round(time.Millisecond), run.killed)
}

// BenchmarkClusterBatch measures a 2,000-AC batch on the three-node cluster, without and
// with the stream leader killed mid-batch (docs/benchmarks.md has the figures):
//
//	go test ./internal/chaos -run '^$' -bench ClusterBatch -benchtime 1x -count 3
func BenchmarkClusterBatch(b *testing.B) {
	for _, kill := range []bool{false, true} {
		name := "steady"
		if kill {
			name = "leader-killed"
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += runClusterBatch(b, 2000, kill).elapsed
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/batch")
		})
	}
}
