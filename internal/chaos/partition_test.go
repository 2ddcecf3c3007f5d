package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

// netLab is a network of namespaces made for one test: each namespace has one veth
// link to a bridge in the host's namespace, which has an address on the same subnet, so
// processes in the host reach every namespace and the namespaces reach each other only
// through their links. Taking a link down partitions its namespace from everything, and
// the TCP connections across it are not reset: they go silent, as over a failed switch.
type netLab struct {
	tb     testing.TB
	tag    string
	subnet string // the first three octets
	bridge string
	ns     []string
	links  []string // the host ends of the namespaces' links
}

// newNetLab makes n namespaces, or skips the test saying why it cannot (not root, no
// ip command, no namespaces in this kernel or container).
func newNetLab(tb testing.TB, n int) *netLab {
	tb.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("partition test: no ip command (iproute2) to make network namespaces")
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	l := &netLab{tb: tb, tag: hex.EncodeToString(b), subnet: fmt.Sprintf("10.%d.%d", 100+int(b[0])%100, b[1])}
	l.bridge = "trb" + l.tag
	if out, err := exec.Command("ip", "link", "add", l.bridge, "type", "bridge").CombinedOutput(); err != nil {
		tb.Skipf("partition test: cannot make network namespaces here (ip link add type bridge: %v: %s); it needs root and a kernel with bridges, veth and namespaces", err, strings.TrimSpace(string(out)))
	}
	tb.Cleanup(l.remove)
	l.run("ip", "addr", "add", l.subnet+".1/24", "dev", l.bridge)
	l.run("ip", "link", "set", l.bridge, "up")
	for i := range n {
		ns, host, inner := fmt.Sprintf("trib%s-%d", l.tag, i), fmt.Sprintf("tv%s%d", l.tag, i), fmt.Sprintf("tn%s%d", l.tag, i)
		l.run("ip", "netns", "add", ns)
		l.ns = append(l.ns, ns)
		l.run("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
		l.links = append(l.links, host)
		l.run("ip", "link", "set", inner, "netns", ns)
		l.run("ip", "link", "set", host, "master", l.bridge)
		l.run("ip", "link", "set", host, "up")
		l.run("ip", "netns", "exec", ns, "ip", "addr", "add", l.ip(i)+"/24", "dev", inner)
		l.run("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
		l.run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	}
	return l
}

// ip is namespace i's address.
func (l *netLab) ip(i int) string { return fmt.Sprintf("%s.%d", l.subnet, 10+i) }

// monitor is the address of the monitoring endpoint of the member in namespace i.
func (l *netLab) monitor(i int) string { return l.ip(i) + ":8222" }

func (l *netLab) run(args ...string) {
	l.tb.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.tb.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// cut partitions namespace i from every other and from the host; heal joins it again.
func (l *netLab) cut(i int)  { l.run("ip", "link", "set", l.links[i], "down") }
func (l *netLab) heal(i int) { l.run("ip", "link", "set", l.links[i], "up") }

// slow makes the traffic into namespace i late: a netem delay where the kernel has it,
// else a token bucket (tbf) so narrow that its queue delays what is sent. It says which.
func (l *netLab) slow(i int) (string, error) {
	out, err := exec.Command("tc", "qdisc", "add", "dev", l.links[i], "root", "netem", "delay", "200ms").CombinedOutput()
	if err == nil {
		return "netem delay 200ms", nil
	}
	netem := strings.TrimSpace(string(out))
	out, err = exec.Command("tc", "qdisc", "add", "dev", l.links[i], "root", "tbf", "rate", "1mbit", "burst", "16kb", "latency", "500ms").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tc netem: %s; tc tbf: %v: %s", netem, err, strings.TrimSpace(string(out)))
	}
	return "tbf rate 1mbit (this kernel has no netem: " + netem + ")", nil
}

// unslow takes namespace i's slow queue away again.
func (l *netLab) unslow(i int) { l.run("tc", "qdisc", "del", "dev", l.links[i], "root") }

func (l *netLab) remove() {
	for _, h := range l.links {
		_ = exec.Command("ip", "link", "del", h).Run()
	}
	for _, ns := range l.ns {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	_ = exec.Command("ip", "link", "del", l.bridge).Run()
}

// TestClusterPartitions: a batch on a three-member cluster whose members, and one of two
// aggregators, each sit in a network namespace of their own. Mid-batch the stream's
// leader is partitioned from everything (a minority of one: it cannot commit, its
// clients must find the majority), then healed; then one aggregator is partitioned from
// the cluster while it holds work (its messages go to the other; what it decided before
// the cut and sends after the heal must not decide again), then healed; then one
// member's link is slowed so it lags (netem, or tbf where the kernel has no netem). The
// batch must end with
// exactly one result per AC, one verdict per AC in the stream and a clean audit.
func TestClusterPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster in network namespaces")
	}
	if os.Getenv("TRIBUNAL_PARTITIONS") != "1" {
		// Under the whole suite's load (every package at once on two cores) one CI run saw
		// the batch make no progress for five minutes while the stream's leader was cut;
		// alone, under a second package's load, it passes in 70-90 s. Until that stall is
		// explained it runs as a step of its own in .ci/run, where a failure still fails CI.
		t.Skip("partition test: runs as its own step of .ci/run; set TRIBUNAL_PARTITIONS=1 to run it here")
	}
	const n = 1000
	lab := newNetLab(t, 4) // three members, one aggregator
	c := &natsCluster{}
	var routes, clients []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats://%s:6222", lab.ip(i)))
		clients = append(clients, fmt.Sprintf("nats://%s:4222", lab.ip(i)))
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		// Each member's monitoring endpoint, on its namespace's address: a stall report
		// asks every member reachable which clients it holds (connz).
		conf := filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(conf, fmt.Appendf(nil, "http: %q\n", lab.monitor(i)), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: "nats " + name, netns: lab.ns[i], args: []string{"serve", "nats", "--config", conf, "--listen", lab.ip(i) + ":4222", "--store", t.TempDir(),
			"--server-name", name, "--cluster-name", "chaos", "--cluster-listen", lab.ip(i) + ":6222", "--routes", strings.Join(routes, ",")}}
		p.start(t)
		t.Cleanup(p.kill)
		c.procs, c.names = append(c.procs, p), append(c.names, name)
	}
	c.urls = strings.Join(clients, ",")
	for _, u := range clients {
		for deadline := time.Now().Add(60 * time.Second); !jetStreamAnswers(u); time.Sleep(100 * time.Millisecond) {
			if p := c.exited(); p != nil || time.Now().After(deadline) {
				t.Fatalf("cluster in namespaces: %s gives no JetStream", u)
			}
		}
	}
	blobURL := "file://" + t.TempDir()
	type svc struct {
		name, netns, health string // health: the address its health endpoint listens on
	}
	specs := []svc{
		{"renderer", "", "127.0.0.1"}, {"gater", "", "127.0.0.1"}, {"judge", "", "127.0.0.1"},
		{"aggregator", "", "127.0.0.1"}, {"aggregator", lab.ns[3], lab.ip(3)},
	}
	var services []*proc
	var health []string
	for i, sp := range specs {
		addr := sp.health + ":8080" // a namespace of its own has every port free
		if sp.netns == "" {
			addr = freeport.Addr(t)
		}
		p := &proc{name: fmt.Sprintf("%s-%d", sp.name, i), netns: sp.netns, args: []string{"serve", sp.name, "--nats", c.urls, "--replicas", "3",
			"--blob", blobURL, "--health", addr, "--ack-wait", "5s", "--instance", fmt.Sprintf("%s-%d", sp.name, i), "--log-level", "warn"}}
		p.start(t)
		t.Cleanup(p.kill)
		services = append(services, p)
		health = append(health, "http://"+addr+"/readyz")
	}
	dumpLogs := func() {
		// The members first and the services last, each without the members' route
		// redials (a cut member is redialled every 2 s), so what the services said
		// survives a log cut short from the top.
		for _, p := range append(c.procs, services...) {
			var kept []string
			for _, line := range strings.Split(p.logString(), "\n") {
				if !strings.Contains(line, "Error trying to connect to route") {
					kept = append(kept, line)
				}
			}
			t.Logf("%s log:\n%s", p.name, tailOf(strings.Join(kept, "\n"), 3000))
		}
	}
	for i, h := range health {
		if !becomesReady(h, 90*time.Second) {
			dumpLogs()
			t.Fatalf("%s not ready", services[i].name)
		}
	}
	// The test reads through connections of its own: all, to every member, and during the
	// leader's cut one to the majority only, so its counts never wait on the minority.
	all := dialTest(t, "all members", c.urls)
	js := all.js
	checkReplicated(t, js, 3)

	dir := writeBatch(t, n)
	out, err := exec.Command(binary, "submit", dir, "--nats", c.urls, "--blob", blobURL).Output()
	if err != nil {
		dumpLogs()
		t.Fatalf("submit: %v", err)
	}
	batchID := strings.TrimSpace(string(out))
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	watch := exec.CommandContext(ctx, binary, "watch", "--batch", batchID, "--nats", c.urls, "--blob", blobURL, "--json", "--quiet")
	var watchOut, watchErr strings.Builder
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	// cut is the namespace partitioned at the moment (-1: none), for the stall report.
	cut := -1
	waitVerdicts := func(at int, r *testConn) {
		t.Helper()
		// Every 15 s it says how far the batch is, why a count could not be read and where
		// its own connection is; a batch without a new verdict for stallAfter (or past the
		// deadline) is a stall, reported with where every service's connection is and what
		// the consumers hold, so a failure tells the services stalling from the reads.
		const stallAfter = 3 * time.Minute
		best, lastErr, said, moved, snapped := 0, error(nil), time.Now(), time.Now(), false
		for {
			got, err := verdicts(ctx, r.js)
			if err != nil {
				lastErr = err
			}
			if got > best {
				best, moved, snapped = got, time.Now(), false
			}
			if best >= at {
				return
			}
			if ctx.Err() != nil || time.Since(moved) > stallAfter {
				report := stallReport(lab, c, services, r, cut)
				dumpLogs()
				t.Fatalf("the batch stalled before %d verdicts: %d read (none new for %s), the last read error %v\n%s\nwatch: %s",
					at, best, time.Since(moved).Round(time.Second), lastErr, report, tailOf(watchErr.String(), 2000))
			}
			if !snapped && time.Since(moved) > 30*time.Second {
				t.Logf("no new verdict for 30 s:\n%s", stallReport(lab, c, services, r, cut))
				snapped = true
			}
			if time.Since(said) > 15*time.Second {
				t.Logf("waiting for %d verdicts: %d so far (last read error: %v; reading through %s)", at, best, lastErr, r)
				said = time.Now()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A minority of one: the stream's leader, cut from the other members and every client.
	waitVerdicts(n/10, all)
	leader := streamLeader(ctx, t, js)
	li := -1
	var majority []string
	for i, name := range c.names {
		if name == leader {
			li = i
		} else {
			majority = append(majority, clients[i])
		}
	}
	maj := dialTest(t, "the majority", strings.Join(majority, ","))
	began := time.Now()
	lab.cut(li)
	cut = li
	t.Logf("partitioned the stream leader %s", leader)
	if next := newLeaderAfter(ctx, maj.js, leader, began); next > 0 {
		t.Logf("the majority elected a new stream leader %s after the cut", next.Round(time.Millisecond))
	}
	at, _ := verdicts(ctx, maj.js)
	waitVerdicts(min(at+n/20, n), maj) // the majority goes on without it
	t.Logf("the majority stored %d verdicts %s after the cut", n/20, time.Since(began).Round(time.Millisecond))
	lab.heal(li)
	cut = -1

	// An aggregator cut from the cluster while it holds work. It is stopped for a moment
	// first, so that messages its pulls asked for wait in its socket whatever its pace,
	// then cut and let go on: it handles them with no member to answer. The cut outlasts
	// the ack wait (its messages go to the other) and the store's 5 s wait for an answer
	// (its handlers give up on the store before it is healed).
	waitVerdicts(n/2, all)
	agg := services[4]
	agg.signal(t, syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	lab.cut(3)
	cut = 3
	agg.signal(t, syscall.SIGCONT)
	t.Log("partitioned one aggregator from the cluster, holding the messages it was sent while stopped")
	at, _ = verdicts(ctx, js)
	// The judges do not wait on the aggregators: the verdicts may be nearly all in by now.
	waitVerdicts(min(at+n/20, n), all)
	time.Sleep(10 * time.Second)
	lab.heal(3)
	cut = -1

	// A member that lags.
	waitVerdicts(3*n/4, all)
	slowed := -1
	if how, err := lab.slow((li + 1) % 3); err != nil {
		t.Logf("slow member not tried: this kernel can slow no link (%v)", err)
	} else {
		slowed = (li + 1) % 3
		t.Logf("slowed %s's link: %s", c.names[slowed], how)
	}

	err = watch.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil // findings, not a failure
	}
	if ctx.Err() != nil || err != nil {
		dumpLogs()
		// An exit of 3 or 4 is the batch's, decided by the aggregators: the rows say which
		// jobs and why.
		t.Fatalf("watch: %v (%v)\n%s\nits results: %s", err, ctx.Err(), watchErr.String(), uncompared(watchOut.String()))
	}
	checkResults(t, []byte(watchOut.String()), n)
	if got, err := verdicts(ctx, js); got != n {
		t.Fatalf("%d verdicts in the stream (%v), want exactly %d", got, err, n)
	}
	if slowed >= 0 {
		// Its link whole again, the lagging member must catch up: every replica current.
		lab.unslow(slowed)
	}
	if state, ok := replicasCurrent(ctx, js, 90*time.Second); !ok {
		dumpLogs()
		t.Fatalf("the stream's replicas are not all current after the partitions healed: %s", state)
	}
	waitAnnounced(ctx, t, js, batchID, 2*time.Minute)
	audit := exec.CommandContext(ctx, binary, "audit", "--batch", batchID, "--nats", c.urls, "--blob", blobURL)
	if aout, err := audit.CombinedOutput(); err != nil {
		dumpLogs()
		t.Fatalf("tribunal audit: %v\n%s", err, tailOf(string(aout), 4000))
	}
}

// testConn is one of the test's own connections, named for what it reaches.
type testConn struct {
	name string
	nc   *nats.Conn
	js   jetstream.JetStream
}

// dialTest connects to urls as the test's reads do: every lost connection redialled at
// once and forever, and a connection to a member cut off noticed within about 3 s
// (missed pings; a cut link resets nothing), so a read never waits on the minority long.
func dialTest(t testing.TB, name, urls string) *testConn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.Name("chaos test: "+name), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.Timeout(time.Second), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatalf("connect to %s (%s): %v", name, urls, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &testConn{name: name, nc: nc, js: js}
}

// String says where the connection is: its state and the member it is connected to.
func (r *testConn) String() string {
	return fmt.Sprintf("the connection to %s, %s to %q", r.name, r.nc.Status(), r.nc.ConnectedServerName())
}

// stallReport says, for a batch that stopped moving, which side of the partition (cut:
// the namespace cut off, -1 none) every client connection is on, as each member reachable
// lists its clients (connz), and what the services' consumers hold (pending, waiting for
// an ack, their leader), read through r, and the end of each service's log: whether the
// services stalled, and where.
func stallReport(lab *netLab, c *natsCluster, services []*proc, r *testConn, cut int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "reading through %s\n", r)
	if cut >= 0 {
		what := "the second aggregator"
		if cut < len(c.names) {
			what = "member " + c.names[cut]
		}
		fmt.Fprintf(&b, "cut off: namespace %d, %s\n", cut, what)
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	for i, name := range c.names {
		side := "majority"
		if i == cut {
			side = "minority (cut off)"
		}
		resp, err := hc.Get("http://" + lab.monitor(i) + "/connz?limit=1024")
		if err != nil {
			fmt.Fprintf(&b, "member %s (%s): its clients cannot be listed: %v\n", name, side, err)
			continue
		}
		var z struct {
			Conns []struct {
				Name string `json:"name"`
				IP   string `json:"ip"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&z)
		resp.Body.Close()
		if err != nil {
			fmt.Fprintf(&b, "member %s (%s): connz: %v\n", name, side, err)
			continue
		}
		var names []string
		for _, cn := range z.Conns {
			names = append(names, fmt.Sprintf("%q from %s", cn.Name, cn.IP))
		}
		fmt.Fprintf(&b, "member %s (%s) holds %d clients: %s\n", name, side, len(names), strings.Join(names, ", "))
	}
	for _, svc := range []string{"renderer", "gater", "judge", "aggregator"} {
		name := "tribunal-" + svc
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons, err := r.js.Consumer(ctx, "TRIBUNAL", name)
		var info *jetstream.ConsumerInfo
		if err == nil {
			info, err = cons.Info(ctx)
		}
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "consumer %s: %v\n", name, err)
			continue
		}
		leader := "none"
		if info.Cluster != nil && info.Cluster.Leader != "" {
			leader = info.Cluster.Leader
		}
		fmt.Fprintf(&b, "consumer %s: %d pending, %d waiting for an ack, %d redelivered, %d pulls waiting, leader %s\n",
			name, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting, leader)
	}
	state, _ := replicasCurrent(context.Background(), r.js, 5*time.Second)
	fmt.Fprintf(&b, "stream: %s", state)
	for _, p := range services {
		fmt.Fprintf(&b, "\n%s's last words: %s", p.name, tailOf(p.logString(), 600))
	}
	return b.String()
}

// uncompared lists the rows of a watch's results that are not compared (at most 20),
// with the summary, or the output's tail when it is not results.
func uncompared(out string) string {
	var results struct {
		Summary json.RawMessage `json:"summary"`
		Rows    []struct {
			ACID   string `json:"ac_id"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		return fmt.Sprintf("not results (%v): %s", err, tailOf(out, 2000))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "summary %s", results.Summary)
	listed := 0
	for _, r := range results.Rows {
		if r.Status == "compared" {
			continue
		}
		if listed++; listed > 20 {
			b.WriteString("\n  ...")
			break
		}
		fmt.Fprintf(&b, "\n  %s: %s %s", r.ACID, r.Status, r.Reason)
	}
	return b.String()
}
