package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	// pause is the longest time without a new verdict from the kill on, and pauseFrom
	// when it began, counted from the kill.
	pause, pauseFrom time.Duration
	// election is how long the stream had no leader after the kill (to within 50 ms).
	election time.Duration
}

// newLeaderAfter polls the event stream until a server other than old leads it and
// returns the time since killed. nats-server elects a successor only once a follower's
// election timeout passes without the leader's heartbeat: 4 to 9 s, at random, for a
// leader that died without stepping down (server/raft.go, minElectionTimeoutDefault and
// maxElectionTimeoutDefault, not configurable).
func newLeaderAfter(ctx context.Context, js jetstream.JetStream, old string, killed time.Time) time.Duration {
	for ctx.Err() == nil {
		// Bounded, and as long as the other reads': one lost on a connection to a member
		// just cut or killed waits no longer, and a loaded cluster answers within it.
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := js.Stream(ictx, "TRIBUNAL")
		cancel()
		if err == nil {
			if c := st.CachedInfo().Cluster; c != nil && c.Leader != "" && c.Leader != old {
				return time.Since(killed)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0
}

// storedTimes are the times the stream stored each message on subject, in stream order:
// the server's clock, so a pause is measured where it happened rather than where a
// client, itself reconnecting, saw it.
func storedTimes(ctx context.Context, tb testing.TB, js jetstream.JetStream, subject string) []time.Time {
	tb.Helper()
	cons, err := js.OrderedConsumer(ctx, "TRIBUNAL", jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, HeadersOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var out []time.Time
	// An ordered consumer recreates itself when its server-side consumer goes (a
	// member restarting after the leader kill moves it): a fetch meanwhile comes back
	// empty. A few empty fetches in a row, not one, mean the messages are not there.
	for pending, empty := info.NumPending, 0; uint64(len(out)) < pending; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		n := len(out)
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, md.Timestamp)
		}
		if len(out) > n {
			empty = 0
			continue
		}
		if empty++; empty == 4 {
			tb.Fatalf("read %d of %d stored times of %s (4 fetches of 5 s in a row came back empty)", n, pending, subject)
		}
	}
	return out
}

// longestPause is the longest gap between verdicts stored at the times seen (in order),
// counting from since, and when it began relative to since.
func longestPause(seen []time.Time, since time.Time) (gap, from time.Duration) {
	last := since
	for _, at := range seen {
		if at.Before(since) {
			continue
		}
		if d := at.Sub(last); d > gap {
			gap, from = d, last.Sub(since)
		}
		last = at
	}
	return gap, from
}

// topology is where a cluster batch runs: members `tribunal serve nats` processes with
// every stream and bucket at replicas copies. R1 is the same services on one server, so
// the cost of replication is a ratio measured side by side.
type topology struct {
	members, replicas int
}

var (
	topoR1 = topology{members: 1, replicas: 1}
	topoR3 = topology{members: 3, replicas: 3}
)

func (t topology) String() string { return fmt.Sprintf("R%d", t.replicas) }

// startSingleNATS starts one `tribunal serve nats` without clustering, as the R1 topology
// runs it, and waits until JetStream answers.
func startSingleNATS(tb testing.TB) *natsCluster {
	tb.Helper()
	addr := freeport.Addr(tb)
	p := &proc{name: "nats n1", args: []string{"serve", "nats", "--listen", addr, "--store", tb.TempDir(), "--server-name", "n1"}}
	p.start(tb)
	tb.Cleanup(p.kill)
	for deadline := time.Now().Add(60 * time.Second); !jetStreamAnswers("nats://" + addr); time.Sleep(100 * time.Millisecond) {
		if p.hasExited() || time.Now().After(deadline) {
			tb.Fatalf("nats n1: no JetStream:\n%s", tailOf(p.logString(), 4000))
		}
	}
	return &natsCluster{procs: []*proc{p}, names: []string{"n1"}, urls: "nats://" + addr}
}

// fault is what a cluster batch suffers once a tenth of it is judged.
type fault int

const (
	noFault fault = iota
	// streamLeaderKilled SIGKILLs the server leading the event stream and restarts it
	// with its store a few seconds later.
	streamLeaderKilled
	// consumerLeaderKilled does the same to a server leading a service's consumer but
	// not the stream.
	consumerLeaderKilled
	// memberReplacedEmpty SIGKILLs a server leading nothing of the stream and starts it
	// again on a new, empty store, as a node whose disk was replaced comes back.
	memberReplacedEmpty
)

// profileDir, from TRIBUNAL_CLUSTER_PROFILES, makes the steady runs of the cluster
// benchmark write a CPU profile of every process there, <topology>-<process>.pprof, and
// a heap profile at its in-use peak, <topology>-<process>.heap: the services' cover the
// batch, the servers' the batch and its audit.
var profileDir = os.Getenv("TRIBUNAL_CLUSTER_PROFILES")

// profile gives p a --cpuprofile and a --peak-heapprofile in profileDir when profiling
// is asked for.
func profile(p *proc, topo topology, f fault) {
	if profileDir == "" || f != noFault {
		return
	}
	base := filepath.Join(profileDir, topo.String()+"-"+strings.ReplaceAll(p.name, " ", "-"))
	p.args = append(p.args, "--cpuprofile", base+".pprof", "--peak-heapprofile", base+".heap")
}

// runClusterBatch runs an n-AC batch through services processes on topo (for R3, a
// three-node JetStream cluster with every stream and bucket replicated three times),
// with the fault f once a tenth of the batch is judged. It checks the outcome every
// run: exactly n results, none twice, every AC compared, exactly n verdicts in the
// stream and a clean `tribunal audit`.
func runClusterBatch(tb testing.TB, n int, topo topology, f fault) clusterRun {
	kill := f != noFault
	tb.Helper()
	began := time.Now()
	var c *natsCluster
	if topo.members == 1 {
		c = startSingleNATS(tb)
	} else {
		c = startNATSCluster(tb, topo.members)
	}
	if profileDir != "" && f == noFault {
		// The servers' profiles start here, after their start; restarted, they record.
		for _, p := range c.procs {
			p.kill()
			<-p.exited
			profile(p, topo, f)
			p.start(tb)
		}
		for _, u := range strings.Split(c.urls, ",") {
			for deadline := time.Now().Add(60 * time.Second); !jetStreamAnswers(u); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					tb.Fatalf("%s gives no JetStream after a restart for profiling", u)
				}
			}
		}
	}
	tb.Logf("nats %s ready in %s", topo, time.Since(began).Round(time.Millisecond))
	blobURL := "file://" + tb.TempDir()
	var services []*proc
	var health []string
	for _, svc := range []string{"renderer", "gater", "judge", "aggregator"} {
		h := freeport.Addr(tb)
		p := &proc{name: svc, args: []string{"serve", svc, "--nats", c.urls, "--replicas", fmt.Sprint(topo.replicas), "--blob", blobURL, "--health", h,
			"--ack-wait", "5s", "--instance", svc, "--log-level", "warn"}}
		profile(p, topo, f)
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
	checkReplicated(tb, js, topo.replicas)
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
	// Four minutes for the 2,000 ACs the tests run; a larger batch (clusterACs) gets 5 ms
	// an AC more, ten times the pace measured at R3.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute+time.Duration(n)*5*time.Millisecond)
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
		victim := leader
		switch f {
		case consumerLeaderKilled:
			victim = consumerLeaderBesides(ctx, tb, js, leader)
		case memberReplacedEmpty:
			victim = memberBesides(c, leader)
		}
		p := c.member(victim)
		if p == nil {
			tb.Fatalf("server %q is none of %v", victim, c.names)
		}
		run.killed, run.killedAt = victim, time.Now()
		p.kill()
		// The election, timed from here: JetStream's own share of the failover.
		elected := make(chan time.Duration, 1)
		if f == streamLeaderKilled {
			go func() { elected <- newLeaderAfter(ctx, js, leader, run.killedAt) }()
		} else {
			elected <- 0
		}
		time.Sleep(3 * time.Second)
		if f == memberReplacedEmpty {
			replaceStore(p, tb.TempDir())
		}
		p.start(tb)
		run.election = <-elected
	}
	err = watch.Wait()
	run.elapsed = time.Since(start)
	// What each process used up to the batch's end (its start included): where the
	// cluster's CPU goes, per AC.
	for _, p := range append(services, c.procs...) {
		if cpu, hwm, ok := p.usage(); ok {
			tb.Logf("%-12s CPU %6.2f s (%.2f ms per AC), peak RSS %4d MiB", p.name, cpu.Seconds(), cpu.Seconds()*1000/float64(n), hwm>>10)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		// The batch's exit code: findings (winner A is not always ours). Not a failure.
		err = nil
	}
	if ctx.Err() != nil || err != nil {
		dumpLogs()
		tb.Fatalf("watch: %v (%v)\n%s", err, ctx.Err(), watchErr.String())
	}
	if kill {
		run.pause, run.pauseFrom = longestPause(storedTimes(ctx, tb, js, "tribunal.default.verdict.emitted"), run.killedAt)
		tb.Logf("killed %s; stream leader elected %s after the kill (0: no election); longest pause in verdicts after it: %s, from %s after it",
			run.killed, run.election.Round(time.Millisecond), run.pause.Round(time.Millisecond), run.pauseFrom.Round(time.Millisecond))
	}
	if profileDir != "" && f == noFault {
		for _, p := range services {
			p.stop() // writes its profile: the batch's work, not the audit's
		}
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
	waitAnnounced(ctx, tb, js, batchID, 2*time.Minute)
	audit := exec.CommandContext(ctx, binary, "audit", "--batch", batchID, "--nats", c.urls, "--blob", blobURL)
	if aout, err := audit.CombinedOutput(); err != nil {
		dumpLogs()
		tb.Fatalf("tribunal audit: %v\n%s", err, tailOf(string(aout), 4000))
	}
	if os.Getenv("CHAOS_DUMP") != "" { // every process's log, for looking into a run that passed
		dumpLogs()
	}
	if profileDir != "" && f == noFault {
		for _, p := range c.procs {
			p.stop() // the servers' profiles take the audit's reads too
		}
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
// key-value bucket with replicas copies.
func checkReplicated(tb testing.TB, js jetstream.JetStream, replicas int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"TRIBUNAL", "KV_tribunal_jobs", "KV_tribunal_batches", "KV_tribunal_cache", "KV_tribunal_views"} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			tb.Fatalf("stream %s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != replicas {
			tb.Fatalf("stream %s has %d replicas, want %d", name, r, replicas)
		}
	}
}

// consumerLeaderBesides is a server leading one of the services' consumers that does
// not lead the event stream (streamLeader).
func consumerLeaderBesides(ctx context.Context, tb testing.TB, js jetstream.JetStream, streamLeader string) string {
	tb.Helper()
	for _, name := range []string{"tribunal-judge", "tribunal-aggregator", "tribunal-renderer", "tribunal-gater"} {
		cons, err := js.Consumer(ctx, "TRIBUNAL", name)
		if err != nil {
			tb.Fatalf("consumer %s: %v", name, err)
		}
		if c := cons.CachedInfo().Cluster; c != nil && c.Leader != "" && c.Leader != streamLeader {
			tb.Logf("killing %s, the leader of consumer %s", c.Leader, name)
			return c.Leader
		}
	}
	tb.Fatalf("every service's consumer is led by the stream's leader %s", streamLeader)
	return ""
}

// memberBesides is a member of c other than name.
func memberBesides(c *natsCluster, name string) string {
	for _, n := range c.names {
		if n != name {
			return n
		}
	}
	return ""
}

// replaceStore points the server process p at a new store folder.
func replaceStore(p *proc, dir string) {
	for i, a := range p.args {
		if a == "--store" && i+1 < len(p.args) {
			p.args[i+1] = dir
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
	if os.Getenv("TRIBUNAL_CLUSTER_FAULTS") != "1" {
		// Under the whole suite's load (every package at once on two cores) two CI runs in
		// a row saw it fail after the kill: once an ordered consumer's fetch came back empty
		// (the harness reads again now), once the batch made no progress for four minutes
		// after the aggregator's consumer missed its heartbeats, as the partition test once
		// did. Alone it passes in about 40 s. Until that stall is explained it runs as a
		// step of its own in .ci/run, after the partition test, where a failure still
		// fails CI.
		t.Skip("leader kill: runs as its own step of .ci/run; set TRIBUNAL_CLUSTER_FAULTS=1 to run it here")
	}
	run := runClusterBatch(t, 2000, topoR3, streamLeaderKilled)
	t.Logf("batch of 2,000 in %s; killed the stream leader %s", run.elapsed.Round(time.Millisecond), run.killed)
}

// BenchmarkClusterBatch measures a 2,000-AC batch on one server at one replica (R1), on
// the three-node cluster at three (R3), and on the cluster with each fault mid-batch
// (the stream's leader killed, a consumer's leader killed, a member back on an empty
// store), in one run, so replication's cost and a failover's are ratios of figures taken
// side by side (docs/benchmarks.md has them):
//
//	go test ./internal/chaos -run '^$' -bench ClusterBatch -benchtime 1x -count 3
//
// TRIBUNAL_TEST_CLUSTER_ACS sets the batch's size (2,000 without it), for the runs by hand at
// 100,000 and 1,000,000 ACs whose per-process peak RSS docs/benchmarks.md compares:
//
//	TRIBUNAL_TEST_CLUSTER_ACS=1000000 go test ./internal/chaos -run '^$' -bench 'ClusterBatch/R3-steady' -benchtime 1x -timeout 3h -v
func BenchmarkClusterBatch(b *testing.B) {
	n := 2000
	if v := os.Getenv("TRIBUNAL_TEST_CLUSTER_ACS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("TRIBUNAL_TEST_CLUSTER_ACS=%q: want a positive number of ACs", v)
		}
	}
	for _, c := range []struct {
		name string
		topo topology
		f    fault
	}{
		{"R1-steady", topoR1, noFault}, {"R3-steady", topoR3, noFault}, {"R3-leader-killed", topoR3, streamLeaderKilled},
		{"R3-consumer-leader-killed", topoR3, consumerLeaderKilled}, {"R3-member-replaced-empty", topoR3, memberReplacedEmpty},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += runClusterBatch(b, n, c.topo, c.f).elapsed
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/batch")
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "ACs/s")
		})
	}
}
