package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"

	"github.com/nats-io/nats.go"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var (
	auditBinOnce sync.Once
	auditBin     string
	auditBinErr  error
)

// auditCLI runs `tribunal audit` as a user does, a process of its own, against env's
// NATS server and blob store, and returns its output and exit code. The binary is built
// once from cmd/tribunal; TRIBUNAL_E2E_AUDIT_BIN names another one instead (for example
// one built from an older commit, to show what it missed).
func auditCLI(t *testing.T, env *Env, args ...string) (string, int) {
	t.Helper()
	bin := os.Getenv("TRIBUNAL_E2E_AUDIT_BIN")
	if bin == "" {
		auditBinOnce.Do(func() { auditBin, _, auditBinErr = tribunalbin.Build("../../cmd/tribunal") })
		if auditBinErr != nil {
			t.Fatal(auditBinErr)
		}
		bin = auditBin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"audit", "--nats", env.NATS.URL, "--blob", "file://" + env.BlobDir, "--tenant", e2eTenant}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = append(os.Environ(), "TRIBUNAL_LOG_LEVEL=error")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("tribunal %v: %v\n%s", full, err, out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// tamperEnv runs an honest mixed batch (ab, critic, equivalence) to completion on a
// fresh tribunal and checks that `tribunal audit` passes it.
func tamperEnv(t *testing.T) (*Env, client.Submission) {
	t.Helper()
	env := NewEnv(t)
	env.Start(scriptedAll(t, nil), "all", bus.Services...)
	sub := env.Submit(WriteBatch(t, auditMixedBatch()), e2eTenant)
	env.Wait(sub, 30*time.Second)
	WaitBatchCompleted(t, env.JS(), e2eTenant, sub.BatchID)
	out, code := auditCLI(t, env, "--batch", sub.BatchID)
	if code != 0 || !strings.Contains(out, "key-value state: compared") {
		t.Fatalf("honest batch: exit %d\n%s", code, out)
	}
	return env, sub
}

// wantAudit runs the audit of batchID and requires exit 1 with every line in want.
func wantAudit(t *testing.T, env *Env, batchID string, want ...string) {
	t.Helper()
	auditExits(t, env, batchID, 1, want...)
}

// wantCleanAudit runs the audit of batchID and requires exit 0 with every line in want.
func wantCleanAudit(t *testing.T, env *Env, batchID string, want ...string) {
	t.Helper()
	auditExits(t, env, batchID, 0, want...)
}

func auditExits(t *testing.T, env *Env, batchID string, exit int, want ...string) {
	t.Helper()
	out, code := auditCLI(t, env, "--batch", batchID)
	if code != exit {
		t.Fatalf("audit of %s: exit %d, want %d\n%s", batchID, code, exit, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("the audit does not name %q:\n%s", w, out)
		}
	}
}

// deleteEvent removes a job's event of type typ from the stream.
func deleteEvent(t *testing.T, env *Env, typ events.Type, job string) events.Event {
	t.Helper()
	msg, ev := auditFind(t, env, typ, job)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.stream().DeleteMsg(ctx, msg.Sequence); err != nil {
		t.Fatal(err)
	}
	return ev
}

// blobFile is where env's file store keeps an object of the e2e tenant.
func blobFile(env *Env, sha string) string {
	return filepath.Join(env.BlobDir, e2eTenant, "sha256", sha[:2], sha)
}

// flipByte changes one byte of an object in env's file store.
func flipByte(t *testing.T, env *Env, sha string) {
	t.Helper()
	data, err := os.ReadFile(blobFile(env, sha))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(blobFile(env, sha), data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// editMediaType rewrites the media type env's file store keeps for an object.
func editMediaType(t *testing.T, env *Env, b *events.Blob, to string) {
	t.Helper()
	meta := blobFile(env, b.SHA256) + ".meta"
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, bytes.Replace(data, []byte(b.MediaType), []byte(to), 1), 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestAuditCLITamperCases: on a real batch, each tamper of issue 12 that the audit used to
// pass makes `tribunal audit` exit 1 and name what changed: the record of what the judge
// saw deleted from the stream, an artifact edited or deleted, a blob's media type edited,
// the batch header replaced in the key-value state, and what an aggregator derived from a
// team's event dead-lettered into another team's batch (a forged batch, a forged block);
// the dead letters alone, refused, are named without failing the audit. So does each of
// issue 23's (item 7), which passed on de157a3: a manifest's and the index's media type
// edited, one byte flipped in a judge call's record or in a plan page, every event of the
// batch deleted (exit 2 then, "no events").
func TestAuditCLITamperCases(t *testing.T) {
	t.Run("render.done deleted", func(t *testing.T) {
		env, sub := tamperEnv(t)
		ev := deleteEvent(t, env, events.TypeRenderDone, "AC-1")
		wantAudit(t, env, sub.BatchID, "MISSING", "the render.done this event was derived from ("+ev.ID+") is not on the stream")
	})
	t.Run("gates.done deleted", func(t *testing.T) {
		env, sub := tamperEnv(t)
		ev := deleteEvent(t, env, events.TypeGatesDone, "AC-critic")
		wantAudit(t, env, sub.BatchID, "MISSING", "job AC-critic verdict.emitted", "the gates.done this event was derived from ("+ev.ID+") is not on the stream")
	})
	t.Run("artifact edited and deleted", func(t *testing.T) {
		env, sub := tamperEnv(t)
		_, ev := auditFind(t, env, events.TypeRenderDone, "AC-2")
		arts := ev.Payload.(*events.RenderDone).Artifacts
		dir := filepath.Join(env.BlobDir, e2eTenant, "sha256")
		ours, ref := arts["ours"].Blob.SHA256, arts["reference"].Blob.SHA256
		if err := os.WriteFile(filepath.Join(dir, ours[:2], ours), []byte("# Notes 1\nSomething else.\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, ref[:2], ref)); err != nil {
			t.Fatal(err)
		}
		wantAudit(t, env, sub.BatchID, "UNREADABLE", "job AC-2 render.done", "artifacts.ours.blob "+ours, "digest mismatch",
			"artifacts.reference.blob "+ref, "not found")
	})
	t.Run("media type edited", func(t *testing.T) {
		env, sub := tamperEnv(t)
		_, ev := auditFind(t, env, events.TypeRenderDone, "AC-eq")
		tr := ev.Payload.(*events.RenderDone).Transcripts[0].Blob
		meta := filepath.Join(env.BlobDir, e2eTenant, "sha256", tr.SHA256[:2], tr.SHA256+".meta")
		data, err := os.ReadFile(meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(meta, bytes.Replace(data, []byte(tr.MediaType), []byte("text/html"), 1), 0o640); err != nil {
			t.Fatal(err)
		}
		wantAudit(t, env, sub.BatchID, "MISMATCH", "job AC-eq render.done", "transcripts[0].blob.media_type: recorded text/html, re-derived "+tr.MediaType)
	})
	t.Run("manifest and index media types edited", func(t *testing.T) {
		env, sub := tamperEnv(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h, _, err := records.New(env.clientRunning().Buckets).Header(ctx, e2eTenant, sub.BatchID)
		if err != nil || h == nil || h.Completion == nil || h.Completion.Index == nil {
			t.Fatalf("header %+v, %v", h, err)
		}
		m := h.Completion.Manifests[events.KindAB]
		editMediaType(t, env, &m, "text/html")
		editMediaType(t, env, h.Completion.Index, "text/html")
		wantAudit(t, env, sub.BatchID, "MISMATCH", "manifest.emitted", "manifest.media_type: recorded text/html, re-derived application/json",
			"the blob store keeps the ab manifest under another media type than the aggregator wrote",
			"batch header: completion.index.media_type: recorded text/html, re-derived "+h.Completion.Index.MediaType)
	})
	t.Run("call record byte flipped", func(t *testing.T) {
		env, sub := tamperEnv(t)
		_, ev := auditFind(t, env, events.TypeVerdictEmitted, "AC-critic")
		rec := critic.VoteOf(ev.Payload.(*events.VerdictEmitted).KindPart).Judge.Call
		if rec == nil {
			t.Fatal("the critic's verdict names no call record")
		}
		flipByte(t, env, rec.SHA256)
		wantAudit(t, env, sub.BatchID, "UNREADABLE", "job AC-critic verdict.emitted", "calls[0].record "+rec.SHA256,
			"the record of judge call 1 of 1 of job AC-critic cannot be read back intact", "digest mismatch")
	})
	t.Run("plan page byte flipped", func(t *testing.T) {
		env, sub := tamperEnv(t)
		_, ev := auditFind(t, env, events.TypeBatchOpened, "")
		page := ev.Payload.(*events.BatchOpened).Pages[0]
		flipByte(t, env, page.SHA256)
		wantAudit(t, env, sub.BatchID, "UNREADABLE", "batch.opened", "pages[0] "+page.SHA256,
			"plan page 1 of 1 (jobs 0 to 4 of 5) cannot be read back intact", "digest mismatch")
	})
	t.Run("every event deleted", func(t *testing.T) {
		env, sub := tamperEnv(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := env.stream().Purge(ctx); err != nil {
			t.Fatal(err)
		}
		wantAudit(t, env, sub.BatchID, "MISSING", "batch header",
			"batch "+sub.BatchID+": the header says complete but the stream holds no event of it",
			"the state holds 5 job records of it", "the stream holds no event at all")
		// A batch neither the stream nor the state knows cannot be audited.
		if out, code := auditCLI(t, env, "--batch", "no-such-batch"); code != 2 || !strings.Contains(out, "the key-value state holds no header of it") {
			t.Fatalf("unknown batch: exit %d\n%s", code, out)
		}
	})
	t.Run("batch header replaced", func(t *testing.T) {
		env, sub := tamperEnv(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b := env.clientRunning().Buckets
		h, _, err := records.New(b).Header(ctx, e2eTenant, sub.BatchID)
		if err != nil || h == nil || h.Completion == nil {
			t.Fatalf("header %+v, %v", h, err)
		}
		h.Completion = nil
		data, _ := json.Marshal(h)
		if _, err := b.Batches.Put(ctx, records.BatchKey(e2eTenant, sub.BatchID), data); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Load(ctx, b, env.Store, e2eTenant, sub.BatchID); err == nil || !strings.Contains(err.Error(), "not complete yet") {
			t.Fatalf("results of the replaced header: %v", err)
		}
		wantAudit(t, env, sub.BatchID, "MISSING", "batch header: completion", "the batch header records no completion, but the events complete the batch")
	})
	t.Run("forged batch and forged block", func(t *testing.T) {
		env, sub := tamperEnv(t)
		// team-x publishes, on its own subjects, events whose envelopes name team-a: a
		// submission of a batch team-a never sent, and a verdict for one of team-a's ACs.
		forgedBatch := "forged-" + sub.BatchID
		spec := events.JobSpec{Kind: events.KindAB, ACID: "AC-1", Criterion: "c", KindPart: &ab.Spec{
			Ours: events.Source{Name: "o.md", Error: "missing artifact: o.md"}, Reference: events.Source{Name: "r.md", Error: "missing artifact: r.md"}, Threshold: 0.75}}
		submitted := events.New(&events.JobSubmitted{Spec: spec, Index: 0, BatchSize: 1}, e2eTenant, forgedBatch, "AC-1", 0, "", nil)
		verdict := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "x", Model: "x"},
			Order: "AB", Status: "ok", RawWinner: "B", Confidence: 1, BiggestGap: "x"}}}, e2eTenant, sub.BatchID, "AC-1", 0, "forged", nil)
		nc := env.Conn()
		for subject, ev := range map[string]events.Event{"tribunal.team-x.job.submitted": submitted, "tribunal.team-x.verdict.emitted": verdict} {
			data, err := events.Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.PublishMsg(&nats.Msg{Subject: subject, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		// The aggregator's router refuses both (their subject contradicts their envelope)
		// and dead-letters them; its dead-letter handling refuses them again.
		poll.Until(t, 20*time.Second, "two dead letters", func() (bool, string) {
			n := env.subjectCount(events.DeadLetterSubject(bus.Aggregator))
			return n >= 2, fmt.Sprintf("%d dead letters", n)
		})
		// Refused, they decide nothing: a failed attack leaves team-a's audits clean, and
		// they name the refused inputs and the team whose subject they came on.
		wantCleanAudit(t, env, forgedBatch, "REFUSED", "job AC-1 job.submitted", "tribunal.team-x.job.submitted (tenant team-x's)")
		wantCleanAudit(t, env, sub.BatchID, "REFUSED", "job AC-1 verdict.emitted", "tribunal.team-x.verdict.emitted (tenant team-x's)")
		// An aggregator that acted on them, as before issue 12, published a block of AC-1
		// in each batch: the audit reports it, naming the refused input it came from.
		for _, forged := range []events.Event{submitted, verdict} {
			blocked := events.New(&events.JobBlocked{Kind: events.KindAB, ACID: "AC-1", Stage: "judge", Reason: "forged"},
				e2eTenant, forged.BatchID, "AC-1", 0, "final", &forged.Envelope)
			data, err := events.Encode(blocked)
			if err != nil {
				t.Fatal(err)
			}
			subject, _ := events.Subject(e2eTenant, events.TypeJobBlocked)
			if err := nc.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: nats.Header{"Nats-Msg-Id": {blocked.ID}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		wantAudit(t, env, forgedBatch, "UNEXPLAINED", "job AC-1 job.blocked", "from job.submitted "+submitted.ID[:12], "derived from an input the aggregator's rules refuse")
		wantAudit(t, env, sub.BatchID, "UNEXPLAINED", "job AC-1 job.blocked", "from verdict.emitted "+verdict.ID[:12], "derived from an input the aggregator's rules refuse")
	})
}
