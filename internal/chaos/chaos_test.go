// Package chaos holds the fault-injection test: tribunal's services, NATS and the S3
// server run as separate OS processes, and the test kills and restarts them while a batch
// runs.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/internal/testutil/s3server"
	"github.com/tribunal-dev/tribunal/internal/testutil/syncbuf"
	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
)

var binary string

func TestMain(m *testing.M) {
	tribunalbin.Main(m, "../../cmd/tribunal", &binary)
}

// proc is one tribunal process the test can kill and start again with the same flags.
type proc struct {
	name string
	args []string
	// netns, when set, is the network namespace the process runs in (ip netns exec).
	netns string
	mu    sync.Mutex
	cmd   *exec.Cmd
	log   *syncbuf.Buffer
	// exited is closed when the current run of the process ends.
	exited chan struct{}
}

// logString is everything the process (every run of it) wrote so far.
func (p *proc) logString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		return ""
	}
	return p.log.String()
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(binary, p.args...)
	if p.netns != "" {
		// ip netns exec replaces itself with the binary: the pid is the server's.
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns, binary}, p.args...)...)
	}
	if p.log == nil {
		p.log = &syncbuf.Buffer{}
	}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd = cmd
	exited := make(chan struct{})
	p.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
}

// signal sends sig to the current run of the process (SIGSTOP and SIGCONT: a process
// frozen for a moment while messages reach it).
func (p *proc) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		t.Fatalf("signal %s: %s is not running", sig, p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

// hasExited reports whether the current run of the process has ended.
func (p *proc) hasExited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// usage is the CPU the current run of the process used so far and its peak RSS in KiB,
// from /proc (Linux); ok is false once it has exited or where /proc cannot tell.
func (p *proc) usage() (cpu time.Duration, hwmKiB int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0, 0, false
	}
	pid := p.cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command name (which may hold spaces) in parentheses.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	const ticks = 100 // USER_HZ on Linux
	cpu = time.Duration(utime+stime) * time.Second / ticks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, found := strings.CutPrefix(line, "VmHWM:"); found {
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &hwmKiB)
		}
	}
	return cpu, hwmKiB, true
}

// stop sends SIGTERM and waits up to 30 s for the process to end: a clean shutdown,
// which writes the process's --cpuprofile.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
	}
}

// kill sends SIGKILL: no graceful shutdown, in-flight messages are simply abandoned.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
}

func waitReady(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	if !becomesReady(url, timeout) {
		t.Fatalf("%s not ready after %s", url, timeout)
	}
}

// becomesReady polls a /readyz URL until it answers 200 or timeout passes.
func becomesReady(url string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestChaos: during a 2,000-AC batch every service process is killed with SIGKILL at
// random moments and restarted, the NATS server is killed and restarted once, and the S3
// server is down for 10 seconds. The batch completes with exactly 2,000 results and
// exactly one verdict per AC.
func TestChaos(t *testing.T) {
	const n = 2000
	s3 := s3server.Start(t)
	blobURL := s3.URL(s3server.Bucket(t)) + "&create_bucket=true"
	natsAddr := freeport.Addr(t)
	natsURL := "nats://" + natsAddr
	natsProc := &proc{name: "nats", args: []string{"serve", "nats", "--listen", natsAddr, "--store", t.TempDir()}}
	natsProc.start(t)
	t.Cleanup(natsProc.kill)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", natsAddr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats did not start: %s", natsProc.log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var services []*proc
	var health []string
	for _, svc := range []string{"renderer", "gater", "judge", "judge", "aggregator"} {
		h := freeport.Addr(t)
		args := []string{"serve", svc, "--nats", natsURL, "--blob", blobURL, "--health", h, "--ack-wait", "5s",
			"--instance", fmt.Sprintf("%s-%d", svc, len(services)), "--log-level", "error"}
		if svc == "judge" {
			// Long enough that kills land on judge calls in flight.
			args = append(args, "--scripted-latency", "1s")
		}
		p := &proc{name: svc, args: args}
		p.start(t)
		t.Cleanup(p.kill)
		services = append(services, p)
		health = append(health, "http://"+h+"/readyz")
	}
	for _, h := range health {
		waitReady(t, h, 30*time.Second)
	}

	dir := writeBatch(t, n)
	out, err := exec.Command(binary, "submit", dir, "--nats", natsURL, "--blob", blobURL).Output()
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	batchID := strings.TrimSpace(string(out))

	// Chaos, while the batch runs.
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var s3Down time.Time
	for round := 0; round < 8; round++ {
		p := services[rng.IntN(len(services))]
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		p.kill()
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		p.start(t)
		switch round {
		case 3:
			natsProc.kill()
			time.Sleep(time.Second)
			natsProc.start(t)
		case 5:
			s3Down = time.Now()
			s3.Stop()
			time.Sleep(10 * time.Second)
			s3.Restart()
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	watch := exec.CommandContext(ctx, binary, "watch", "--batch", batchID, "--nats", natsURL, "--blob", blobURL, "--json", "--quiet")
	res, err := watch.Output()
	if ctx.Err() != nil {
		for _, p := range append(services, natsProc) {
			t.Logf("%s log:\n%s", p.name, tailOf(p.logString(), 2000))
		}
		t.Fatalf("batch did not complete: %v", ctx.Err())
	}
	if err != nil {
		t.Logf("watch: %v", err)
	}
	checkResults(t, res, n)
	// Exactly one verdict per AC in the stream, whatever was killed mid-call.
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if got, err := verdicts(ctx, js); got != n {
		t.Fatalf("%d verdicts in the stream (%v), want exactly %d", got, err, n)
	}
	// The faults must have landed on a running batch, not after it.
	completed := completedAt(ctx, t, js, batchID)
	if !completed.After(s3Down) {
		t.Fatalf("the batch completed at %s, before the S3 outage at %s: the chaos missed it", completed, s3Down)
	}
	t.Logf("batch completed %s after the S3 outage began", completed.Sub(s3Down).Round(time.Second))
}

// writeBatch writes an n-AC ab batch (AC-0 ... AC-<n-1>, one small text artifact pair
// each) into a new folder.
func writeBatch(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	var sb strings.Builder
	sb.WriteString("version: 1\nname: chaos\nacs:\n")
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("o%d.md", i)), []byte(fmt.Sprintf("ours %d\n", i)), 0o644)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%d.md", i)), []byte(fmt.Sprintf("reference %d\n", i)), 0o644)
		fmt.Fprintf(&sb, "  - {id: AC-%d, criterion: c, ours: o%d.md, reference: r%d.md}\n", i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkResults reads `tribunal watch --json` output: exactly n results, no AC twice,
// every one compared.
func checkResults(t testing.TB, res []byte, n int) {
	t.Helper()
	var results struct {
		Summary struct{ Total, Compared, Blocked int }
		Rows    []struct {
			ACID   string `json:"ac_id"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"results"`
	}
	if err := json.Unmarshal(res, &results); err != nil {
		t.Fatalf("watch output: %v\n%s", err, tailOf(string(res), 2000))
	}
	seen := map[string]bool{}
	for _, r := range results.Rows {
		if seen[r.ACID] {
			t.Fatalf("%s reported twice", r.ACID)
		}
		seen[r.ACID] = true
		if r.Status != "compared" {
			t.Errorf("%s: %s %s", r.ACID, r.Status, r.Reason)
		}
	}
	if len(results.Rows) != n || results.Summary.Total != n {
		t.Fatalf("%d results (summary %d), want %d", len(results.Rows), results.Summary.Total, n)
	}
}

// verdicts counts the verdicts stored in the stream: the judge publishes one per AC, so
// a duplicate would be a message more.
func verdicts(ctx context.Context, js jetstream.JetStream) (int, error) {
	const subject = "tribunal.default.verdict.emitted"
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(ictx, "TRIBUNAL")
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ictx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	return int(info.State.Subjects[subject]), nil
}

// waitAnnounced waits until the stream holds the batch's batch.completed, and says how
// long after the state said complete it came. The aggregator stores the completion before
// it publishes it, and a publish that fails (a partition, a lagging member) is made again
// at the completing input's redelivery: until then `tribunal watch`, which reads the
// state, has returned while an audit would find the announcement missing.
func waitAnnounced(ctx context.Context, tb testing.TB, js jetstream.JetStream, batchID string, within time.Duration) {
	tb.Helper()
	const subject = "tribunal.default.batch.completed"
	seen := time.Now()
	var last string
	for deadline := seen.Add(within); ; time.Sleep(100 * time.Millisecond) {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := js.Stream(ictx, "TRIBUNAL")
		var m *jetstream.RawStreamMsg
		if err == nil {
			m, err = st.GetLastMsgForSubject(ictx, subject)
		}
		cancel()
		if err == nil && strings.Contains(string(m.Data), batchID) {
			if lag := time.Since(seen); lag > time.Second {
				tb.Logf("the batch.completed reached the stream %s after the state said complete", lag.Round(time.Millisecond))
			}
			return
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			tb.Fatalf("the stream holds no batch.completed of %s %s after the state said complete (last read: %s)", batchID, within, last)
		}
	}
}

// completedAt is when the aggregator recorded the batch's completion.
func completedAt(ctx context.Context, t testing.TB, js jetstream.JetStream, batchID string) time.Time {
	t.Helper()
	kv, err := js.KeyValue(ctx, "tribunal_batches")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "default."+batchID)
	if err != nil {
		t.Fatal(err)
	}
	var header struct {
		Completion struct{ At time.Time } `json:"completion"`
	}
	if err := json.Unmarshal(e.Value(), &header); err != nil {
		t.Fatal(err)
	}
	return header.Completion.At
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
