package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// batchModes is a deployment that judges directly unless a batch asks for the batch
// mode, polling at test speed.
func batchModes(dflt string, linger time.Duration, waiting int) *app.JudgeModes {
	return &app.JudgeModes{Policy: batchmode.Policy{Default: dflt, AllowBatch: true},
		Batch:   batchmode.Config{Linger: linger, PollMin: 20 * time.Millisecond, PollMax: 200 * time.Millisecond},
		Waiting: waiting}
}

// verdictInfos is every judge info of every verdict of tenant in the stream, by job.
func (e *Env) verdictInfos(tenant string) map[string][]events.JudgeInfo {
	e.T.Helper()
	out := map[string][]events.JudgeInfo{}
	for _, m := range e.subjectMsgs("tribunal." + tenant + ".verdict.emitted") {
		ev, err := events.Decode(m.Data)
		if err != nil {
			e.T.Fatal(err)
		}
		v := ev.Payload.(*events.VerdictEmitted)
		if len(v.Votes) == 0 {
			out[ev.JobID] = append(out[ev.JobID], events.JudgeInfo{})
		}
		for _, vote := range v.Votes {
			out[ev.JobID] = append(out[ev.JobID], vote.Judge)
		}
	}
	return out
}

// TestBatchModeThousandACs: a 1,000-AC batch asking `judge_mode: batch` is judged
// through the provider's batch API in one or a few provider batches, with no direct
// call; every AC gets exactly one verdict, each vote marked as batched, and the answers
// (the fake server's fixed 50 % slot-A shape) are checked like direct ones.
func TestBatchModeThousandACs(t *testing.T) {
	const n = 1000
	p, fake := OpenAIJudge(t, "fake-model", fakellm.Options{BatchLatency: 300 * time.Millisecond, Respond: fakellm.SlotA(0.5)})
	env := NewEnv(t)
	env.StartWith(app.Options{Services: bus.Services, Concurrency: 16, Provider: p, Instance: "judge-batch", CloseTimeout: 10 * time.Second,
		JudgeModes: batchModes("direct", 3*time.Second, n+100)})
	b := WriteBatch(t, batchFiles{N: n, Salt: "bm", Extra: "judge_mode: batch\n"}.build())
	batched := func() float64 {
		var m dto.Metric
		if err := telemetry.Default().ProviderModeCalls.WithLabelValues("openai", "fake-model", telemetry.ModeBatch, "ok").Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	before := batched()
	start := time.Now()
	res := env.Wait(env.Submit(b, e2eTenant), 3*time.Minute)
	took := time.Since(start)
	if res.Summary.Total != n || res.Summary.Compared != n {
		t.Fatalf("summary %+v, want %d compared", res.Summary, n)
	}
	if fake.Calls() != 0 {
		t.Fatalf("%d direct chat calls, want none", fake.Calls())
	}
	batches := fake.BatchesCreated()
	if batches < 1 || batches > 5 {
		t.Fatalf("%d provider batches for %d ACs, want one or a few", batches, n)
	}
	if got := fake.BatchRequests(); got != n || fake.BatchDuplicates() != 0 {
		t.Fatalf("%d requests in provider batches (%d custom_ids twice), want %d, each once", got, fake.BatchDuplicates(), n)
	}
	if got := batched() - before; got != n {
		t.Fatalf("tribunal_provider_mode_calls_total{mode=batch} rose by %v, want %d", got, n)
	}
	infos := env.verdictInfos(e2eTenant)
	if len(infos) != n {
		t.Fatalf("verdicts for %d ACs, want %d", len(infos), n)
	}
	winners := map[string]int{}
	for _, r := range res.Rows {
		winners[r.RawWinner]++
	}
	for job, ji := range infos {
		if len(ji) != 1 || !ji[0].Batch || ji[0].Provider != "openai" || ji[0].PromptTokens == 0 {
			t.Fatalf("%s: judge info %+v, want one batched openai vote", job, ji)
		}
	}
	if winners["A"] != n/2 || winners["B"] != n/2 {
		t.Fatalf("raw winners %v, want the fake's 50/50 shape", winners)
	}
	t.Logf("%d ACs in %d provider batch(es), %s from submission to completion", n, batches, took.Round(time.Millisecond))
}

// TestBatchModeExpiry: a provider batch that expires ends each of its ACs blocked, with
// a reason naming the provider batch and the expiry, and the batch completes.
func TestBatchModeExpiry(t *testing.T) {
	p, fake := OpenAIJudge(t, "fake-model", fakellm.Options{BatchLatency: 100 * time.Millisecond, BatchExpire: true})
	env := NewEnv(t)
	env.StartWith(app.Options{Services: bus.Services, Concurrency: 16, Provider: p, Instance: "judge-batch", CloseTimeout: 10 * time.Second,
		JudgeModes: batchModes("batch", 200*time.Millisecond, 64)})
	res := env.Wait(env.Submit(WriteBatch(t, batchFiles{N: 5, Salt: "exp"}.build()), e2eTenant), time.Minute)
	if res.Summary.Blocked != 5 {
		t.Fatalf("summary %+v, want 5 blocked", res.Summary)
	}
	for _, r := range res.Rows {
		if r.Status != string(events.StatusBlocked) || !strings.Contains(r.Reason, "provider batch batch_fake_") ||
			!strings.Contains(r.Reason, "expired") || !strings.Contains(r.Reason, "batch_expired") {
			t.Fatalf("%s: %s %q, want blocked naming the expired provider batch", r.ACID, r.Status, r.Reason)
		}
	}
	if fake.Calls() != 0 || fake.BatchDuplicates() != 0 {
		t.Fatalf("%d direct calls, %d custom_ids submitted twice", fake.Calls(), fake.BatchDuplicates())
	}
}

var (
	batchBinOnce sync.Once
	batchBin     string
	batchBinErr  error
)

// judgeProc is `tribunal serve judge` as a process of its own.
type judgeProc struct {
	args []string
	cmd  *exec.Cmd
	log  bytes.Buffer
	mu   sync.Mutex
}

func (j *judgeProc) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.log.Write(p)
}

func (j *judgeProc) logs() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.log.String()
}

func (j *judgeProc) start(t *testing.T, health string) {
	t.Helper()
	j.cmd = exec.Command(batchBin, j.args...)
	j.cmd.Stdout, j.cmd.Stderr = j, j
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.cmd.Process.Kill(); _ = j.cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get("http://" + health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("judge not ready:\n%s", j.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened\n%s", what, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBatchModeJudgeKilled: the judge runs as a process; it is killed (SIGKILL) while
// its provider batch is in flight, and started again. The new judge gets the
// redelivered messages, finds their calls in the provider batch the old one submitted,
// waits for it and publishes the verdicts: the fake server saw exactly one provider
// batch, no request twice, and every AC has exactly one verdict.
func TestBatchModeJudgeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tribunal command")
	}
	const n = 40
	batchBinOnce.Do(func() { batchBin, _, batchBinErr = tribunalbin.Build("../../cmd/tribunal") })
	if batchBinErr != nil {
		t.Fatal(batchBinErr)
	}
	fake := fakellm.New(fakellm.Options{BatchLatency: 50 * time.Millisecond})
	t.Cleanup(fake.Close)
	fake.HoldBatches()
	env := NewEnv(t)
	env.Start(nil, "rest", bus.Renderer, bus.Gater, bus.Aggregator)
	health := freeport.Addr(t)
	judge := &judgeProc{args: []string{"serve", "judge", "--nats", env.NATS.URL, "--blob", "file://" + env.BlobDir, "--health", health,
		"--ack-wait", "2s", "--log-level", "warn", "--instance", "judge-proc",
		"--judge", "openai", "--judge-model", "fake-model", "--openai-base-url", fake.BaseURL(),
		"--judge-mode", "batch", "--judge-batch-max-requests", fmt.Sprint(n), "--judge-batch-linger", "1m",
		"--judge-batch-poll", "20ms", "--judge-batch-poll-max", "100ms"}}
	judge.start(t, health)

	sub := env.Submit(WriteBatch(t, batchFiles{N: n, Salt: "kill"}.build()), e2eTenant)
	waitFor(t, "a provider batch holding every AC", func() bool { return fake.BatchRequests() == n }, judge.logs)
	// The judge polls a provider batch only once its record says submitted: the kill
	// lands on a batch in flight, recorded. (A kill between the create call and that
	// record is recovered by the provider batch's metadata, after
	// batchmode.DefaultSubmitStale: TestInterruptedSubmissionIsAdopted.)
	waitFor(t, "the provider batch polled", func() bool { return fake.BatchPolls() > 0 }, judge.logs)
	// The fake provider validates a batch for a moment before it is in progress, as a
	// real one does; on a loaded machine the first poll can come while it validates.
	waitFor(t, "the provider batch in progress", func() bool {
		s := fake.BatchStatuses()
		return len(s) == 1 && s[0] == batchmode.StatusInProgress
	}, judge.logs)
	if err := judge.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = judge.cmd.Wait()

	judge.start(t, health)
	fake.ReleaseBatches()
	waitFor(t, "the batch's completion", func() bool { return len(env.verdictInfos(e2eTenant)) >= n }, judge.logs)
	res := env.Wait(sub, 2*time.Minute)
	if res.Summary.Compared != n {
		t.Fatalf("summary %+v, want %d compared\n%s", res.Summary, n, judge.logs())
	}
	if got := fake.BatchesCreated(); got != 1 {
		t.Fatalf("%d provider batches created, want exactly the one submitted before the kill", got)
	}
	if fake.BatchRequests() != n || fake.BatchDuplicates() != 0 || fake.Calls() != 0 {
		t.Fatalf("%d batch requests, %d custom_ids twice, %d direct calls: want %d, 0, 0", fake.BatchRequests(), fake.BatchDuplicates(), fake.Calls(), n)
	}
	infos := env.verdictInfos(e2eTenant)
	if len(infos) != n {
		t.Fatalf("verdicts for %d ACs, want %d", len(infos), n)
	}
	for job, ji := range infos {
		if len(ji) != 1 || !ji[0].Batch {
			t.Fatalf("%s: %d verdict votes %+v, want exactly one batched verdict", job, len(ji), ji)
		}
	}
}
