package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// errCut is the publish failure cutPublisher injects.
var errCut = errors.New("connection lost (injected)")

// cutPublisher publishes the first left messages it is given, then fails: a submission
// killed mid-publish leaves exactly that, what was sent stored and the rest never sent.
type cutPublisher struct {
	pub  client.Publisher
	mu   sync.Mutex
	left int
}

func (c *cutPublisher) Publish(topic string, msgs ...*message.Message) error {
	c.mu.Lock()
	n := min(c.left, len(msgs))
	c.left -= n
	c.mu.Unlock()
	if n > 0 {
		if err := c.pub.Publish(topic, msgs[:n]...); err != nil {
			return err
		}
	}
	if n < len(msgs) {
		return errCut
	}
	return nil
}

// submitCut submits b as batch id, the publisher failing after the batch.opened and
// jobs job.submitted events.
func (e *Env) submitCut(b *batch.Batch, id string, jobs int) client.Submission {
	e.T.Helper()
	r := e.clientRunning()
	s := &client.Submitter{Pub: &cutPublisher{pub: r.Pub, left: 1 + jobs}, Store: e.Store}
	sub, err := s.Submit(context.Background(), b, e2eTenant, id)
	if !errors.Is(err, errCut) {
		e.T.Fatalf("a submission cut after %d jobs: %v", jobs, err)
	}
	if got := e.subjectCount("tribunal." + e2eTenant + ".job.submitted"); got != uint64(jobs) {
		e.T.Fatalf("%d job.submitted stored, want the %d sent before the cut", got, jobs)
	}
	return sub
}

// resume finishes batch id with a healthy publisher.
func (e *Env) resume(b *batch.Batch, id string) (client.Submission, error) {
	e.T.Helper()
	r := e.clientRunning()
	s := &client.Submitter{Pub: r.Pub, Store: e.Store}
	return s.Resume(context.Background(), r.Buckets, b, e2eTenant, id)
}

// header reads a batch header.
func (e *Env) header(id string) *records.Batch {
	e.T.Helper()
	h, _, err := records.New(e.clientRunning().Buckets).Header(context.Background(), e2eTenant, id)
	if err != nil {
		e.T.Fatal(err)
	}
	return h
}

// waitRecorded waits until the aggregator has recorded n jobs of batch id.
func (e *Env) waitRecorded(id string, n int) {
	e.T.Helper()
	store := records.New(e.clientRunning().Buckets)
	poll.Until(e.T, 60*time.Second, fmt.Sprintf("%d jobs of %s recorded", n, id), func() (bool, string) {
		got, err := store.JobIDs(context.Background(), e2eTenant, id)
		if err != nil {
			return false, err.Error()
		}
		return len(got) >= n, fmt.Sprint(len(got))
	})
}

// waitIdle waits until the aggregator's consumer has handled everything stored.
func (e *Env) waitIdle() {
	e.T.Helper()
	js := e.JS()
	poll.Until(e.T, 60*time.Second, "the aggregator idle", func() (bool, string) {
		c, err := js.Consumer(context.Background(), "TRIBUNAL", bus.ConsumerName(bus.Aggregator))
		if err != nil {
			return false, err.Error()
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0, fmt.Sprintf("%d pending, %d unacked", info.NumPending, info.NumAckPending)
	})
}

func requireCleanAudit(t *testing.T, env *Env, id string) {
	t.Helper()
	rep := auditBatch(t, env, id)
	if len(rep.Mismatches) != 0 {
		t.Fatalf("audit of %s: %d findings:%s", id, len(rep.Mismatches), auditDump(t, rep))
	}
}

// TestSubmitChecksEveryEventFirst: every event is built and checked before the first is
// published. A job that cannot be submitted even blocked (here a rubric view whose
// generated id is another AC's id) refuses the batch with nothing published; an AC whose
// event is too large (a 1.2 MB criterion) or invalid (duplicate case ids) costs only that
// AC, submitted blocked with the field named, and the rest of the batch is judged.
func TestSubmitChecksEveryEventFirst(t *testing.T) {
	env := NewEnv(t)
	env.Start(scriptedAll(t, nil), "all", bus.Services...)

	dup := map[string]string{
		"feature/spec.json": `{"feature":"tasks","adapter":"web","design_system":{"tokens":"tokens.json"},
 "targets":[{"id":"list","route":"https://app.example/tasks","states":["populated"],"appearances":["light"],
 "references":[{"state":"populated","appearance":"light","status":"needed","file":"references/list-populated-light.png"}]}]}`,
		"feature/spec.md":     "# tasks\n",
		"feature/tokens.json": `{"colors":{"surface":"#ffffff"}}`,
		"a.md":                "# a\n",
		"b.md":                "# b\n",
		"batch.yaml": "version: 1\nname: dup\nacs:\n  - {id: F, kind: rubric, spec: feature/spec.json}\n" +
			"  - {id: F--list--populated--light, criterion: c, ours: a.md, reference: b.md}\n",
	}
	s := &client.Submitter{Pub: env.clientRunning().Pub, Store: env.Store}
	_, err := s.Submit(context.Background(), WriteBatch(t, dup), e2eTenant, "refused-1")
	var refused *client.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), `job id "F--list--populated--light" is also a job of F`) {
		t.Fatalf("a duplicate job id: %v", err)
	}
	if n := env.subjectCount("tribunal." + e2eTenant + ".>"); n != 0 {
		t.Fatalf("a refused batch published %d events", n)
	}

	files := batchFiles{N: 3}.build()
	files["batch.yaml"] += "  - id: AC-big\n    criterion: " + strings.Repeat("x", 1200*1024) + "\n    ours: ours/0.md\n    reference: ref/0.md\n"
	files["original.md"], files["candidate.md"] = "# Skill\nAsk first.\n", "# Skill\nAsk.\n"
	files["batch.yaml"] += "  - id: AC-eq\n    kind: equivalence\n    original: original.md\n    candidate: candidate.md\n    round: 1\n" +
		"    cases:\n      - {id: c1, tag: happy, input: one}\n      - {id: c1, tag: edge, input: two}\n"
	sub := env.Submit(WriteBatch(t, files), e2eTenant)
	if len(sub.Blocked) != 2 || !strings.Contains(sub.Blocked[0], "AC-big: line") || !strings.Contains(sub.Blocked[0], "criterion: 1228800 bytes") ||
		!strings.Contains(sub.Blocked[1], "AC-eq: line") || !strings.Contains(sub.Blocked[1], "equivalence.cases[1].id") {
		t.Fatalf("blocked before publishing: %q", sub.Blocked)
	}
	res := env.Wait(sub, 60*time.Second)
	rows := rowsByID(res.Rows)
	if len(res.Rows) != 5 || res.Summary.Compared != 3 || res.Summary.Blocked != 2 {
		t.Fatalf("summary %+v, %d rows", res.Summary, len(res.Rows))
	}
	for id, want := range map[string]string{"AC-big": "criterion: 1228800 bytes make its job.submitted", "AC-eq": "duplicate case id"} {
		if r := rows[id]; r.Status != string(events.StatusBlocked) || !strings.Contains(r.Reason, want) {
			t.Errorf("%s: %s %q, want blocked with %q", id, r.Status, r.Reason, want)
		}
	}
	if n := env.subjectCount(events.DeadLetterPrefix + ".>"); n != 0 {
		t.Errorf("%d dead letters: an oversize event reached the bus", n)
	}
	requireCleanAudit(t, env, sub.BatchID)
}

// TestResumeFinishesAnInterruptedSubmission: a submission cut mid-publish is finished by
// Resume under the same batch id: exactly N results, none twice, every event once in the
// stream, a clean audit. A batch file that changed since is refused, publishing nothing.
func TestResumeFinishesAnInterruptedSubmission(t *testing.T) {
	const n, cut = 300, 120
	env := NewEnv(t)
	env.Start(scriptedAll(t, nil), "all", bus.Services...)
	b := WriteBatch(t, batchFiles{N: n}.build())
	id := client.NewBatchID(b)
	env.submitCut(b, id, cut)
	poll.Until(t, 30*time.Second, "the batch's plan recorded", func() (bool, string) { h := env.header(id); return h != nil && h.Plan != nil, "" })
	if h := env.header(id); h.Size != n || h.Completion != nil {
		t.Fatalf("header %+v", h)
	}

	var refused *client.RefusedError
	if _, err := env.resume(WriteBatch(t, batchFiles{N: n + 1}.build()), id); !errors.As(err, &refused) || !strings.Contains(err.Error(), fmt.Sprintf("submitted with %d jobs", n)) {
		t.Fatalf("resuming with another job count: %v", err)
	}
	if _, err := env.resume(WriteBatch(t, batchFiles{N: n, Salt: "changed"}.build()), id); !errors.As(err, &refused) || !strings.Contains(err.Error(), "changed since") {
		t.Fatalf("resuming with changed artifacts: %v", err)
	}
	if got := env.subjectCount("tribunal." + e2eTenant + ".job.submitted"); got != cut {
		t.Fatalf("a refused resume published: %d job.submitted", got)
	}

	sub, err := env.resume(b, id)
	if err != nil {
		t.Fatal(err)
	}
	if sub.BatchID != id || sub.Jobs != n || sub.Recorded+sub.Published < n || sub.Published < n-cut {
		t.Fatalf("resume %+v", sub)
	}
	res := env.Wait(sub, 120*time.Second)
	checkEachDecidedOnce(t, env, sub, res, n)
	if got := env.subjectCount("tribunal." + e2eTenant + ".job.submitted"); got != n {
		t.Errorf("%d job.submitted in the stream, want %d", got, n)
	}
	requireCleanAudit(t, env, id)
}

// TestResumeAfterTheDuplicateWindow: long after the stream has forgotten the first
// submission's ids, Resume still completes the batch exactly once (it sends only what is
// not recorded); and even a whole batch published again then changes no result, because
// the rules ignore a repeated job.submitted of a recorded job.
func TestResumeAfterTheDuplicateWindow(t *testing.T) {
	const n, cut, window = 200, 80, time.Second
	env := NewEnv(t)
	env.Bus.DuplicateWindow = window
	env.Start(scriptedAll(t, nil), "all", bus.Services...)
	b := WriteBatch(t, batchFiles{N: n}.build())
	id := client.NewBatchID(b)
	env.submitCut(b, id, cut)
	env.waitRecorded(id, cut)
	time.Sleep(window + 500*time.Millisecond)

	sub, err := env.resume(b, id)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Recorded != cut || sub.Published != n-cut {
		t.Fatalf("resume %+v: want %d recorded, %d published", sub, cut, n-cut)
	}
	res := env.Wait(sub, 120*time.Second)
	checkEachDecidedOnce(t, env, sub, res, n)
	requireCleanAudit(t, env, id)

	// Everything again, past the window: stored, and ignored.
	time.Sleep(window + 500*time.Millisecond)
	s := &client.Submitter{Pub: env.clientRunning().Pub, Store: env.Store}
	again, err := s.Submit(context.Background(), b, e2eTenant, id)
	if err != nil || again.Published != n {
		t.Fatalf("republish: %+v, %v", again, err)
	}
	env.waitIdle()
	if got := env.subjectCount("tribunal." + e2eTenant + ".job.submitted"); got != 2*n {
		t.Fatalf("%d job.submitted stored, want %d: the copies must be past the window", got, 2*n)
	}
	checkEachDecidedOnce(t, env, sub, env.Wait(sub, 10*time.Second), n)
}

// TestCancelHalfSubmittedBatch: a batch whose submission was cut mid-publish is ended by
// a cancel: every AC without an outcome, the never-published ones included, is blocked as
// cancelled, judged ones keep their outcome, and the batch completes exactly once with
// its manifest and a clean audit, although the cancel raced with jobs still being judged.
func TestCancelHalfSubmittedBatch(t *testing.T) {
	const n, cut = 200, 100
	env := NewEnv(t)
	env.Start(scriptedLatency(t, 100*time.Millisecond), "all", bus.Services...)
	b := WriteBatch(t, batchFiles{N: n}.build())
	id := client.NewBatchID(b)
	env.submitCut(b, id, cut)
	poll.Until(t, 30*time.Second, "the batch's plan recorded", func() (bool, string) { h := env.header(id); return h != nil && h.Plan != nil, "" })

	r := env.clientRunning()
	h, err := client.Cancel(context.Background(), r.Buckets, r.Pub, e2eTenant, id, "tester")
	if err != nil || h.Size != n {
		t.Fatalf("cancel: %+v, %v", h, err)
	}
	res := env.Wait(client.Submission{Tenant: e2eTenant, BatchID: id}, 120*time.Second)
	if res.Summary.Total != n || len(res.Rows) != n || res.Summary.Compared+res.Summary.Blocked != n || res.Manifest == nil {
		t.Fatalf("summary %+v, %d rows, manifest %v", res.Summary, len(res.Rows), res.Manifest != nil)
	}
	seen := map[string]bool{}
	cancelled := 0
	for _, row := range res.Rows {
		if seen[row.ACID] {
			t.Fatalf("AC %s twice", row.ACID)
		}
		seen[row.ACID] = true
		if row.Status == string(events.StatusBlocked) {
			cancelled++
			if row.Reason != "cancelled by tester" {
				t.Errorf("%s: blocked %q", row.ACID, row.Reason)
			}
		}
	}
	recs := env.jobs(id)
	if len(recs) != n {
		t.Fatalf("%d job records, want %d", len(recs), n)
	}
	for _, j := range recs {
		if j.Index >= cut && (j.Status != events.StatusBlocked || j.BlockStage != "cancel" || j.BlockReason != "cancelled by tester") {
			t.Errorf("%s (index %d, never submitted): %s %s %q", j.ACID, j.Index, j.Status, j.BlockStage, j.BlockReason)
		}
	}
	t.Logf("%d of %d ACs cancelled (%d never submitted)", cancelled, n, n-cut)
	WaitBatchCompleted(t, env.JS(), e2eTenant, id)
	env.waitIdle()
	if c := env.subjectCount(events.AnyTenant(events.TypeBatchCompleted)); c != 1 {
		t.Errorf("%d batch.completed, want 1", c)
	}
	if c := env.subjectCount(events.AnyTenant(events.TypeManifestEmitted)); c != 1 {
		t.Errorf("%d manifest.emitted, want 1", c)
	}
	requireCleanAudit(t, env, id)

	var refused *client.RefusedError
	if _, err := env.resume(b, id); !errors.As(err, &refused) || !strings.Contains(err.Error(), "cancelled by tester") {
		t.Fatalf("resuming a cancelled batch: %v", err)
	}
	if _, err := client.Cancel(context.Background(), r.Buckets, r.Pub, e2eTenant, id, "tester"); !errors.As(err, &refused) || !strings.Contains(err.Error(), "nothing to cancel") {
		t.Fatalf("cancelling a complete batch: %v", err)
	}
}
