package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// auditMixedBatch is an honest batch of every non-visual kind: two compared ab ACs, an ab
// AC blocked by a missing artifact, a critic AC and an equivalence AC.
func auditMixedBatch() map[string]string {
	files := batchFiles{N: 2, Name: "audit"}.build()
	addAC(files, "AC-blocked", "the notes are clear", "absent.md", "ref/0.md")
	files["original.md"] = "# Skill\nAlways ask for the component first.\n"
	files["candidate.md"] = "# Skill\nAsk for the component.\n"
	files["batch.yaml"] += "  - {id: AC-critic, kind: critic, task: summarise the notes, output: ours/0.md}\n" +
		"  - id: AC-eq\n    kind: equivalence\n    original: original.md\n    candidate: candidate.md\n    round: 1\n" + equivCases
	return files
}

// auditBatch replays one batch of the e2e tenant and audits it, checking the aggregator's
// state as the CLI does.
func auditBatch(t *testing.T, env *Env, batchID string) *audit.Report {
	t.Helper()
	WaitBatchCompleted(t, env.JS(), e2eTenant, batchID)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := audit.Run(ctx, env.JS(), audit.Filter{Tenant: e2eTenant, BatchID: batchID}, env.Store)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.CheckBatchState(ctx, &rep, records.New(env.clientRunning().Buckets), e2eTenant, batchID); err != nil {
		t.Fatal(err)
	}
	return &rep
}

func auditDump(t *testing.T, rep *audit.Report) string {
	t.Helper()
	var b strings.Builder
	for _, m := range rep.Mismatches {
		b.WriteString("\n  " + m.String())
	}
	return b.String()
}

// auditFind returns the stored message of type typ for job, decoded.
func auditFind(t *testing.T, env *Env, typ events.Type, job string) (*jetstream.RawStreamMsg, events.Event) {
	t.Helper()
	for _, m := range env.subjectMsgs("tribunal." + e2eTenant + "." + string(typ)) {
		ev, err := events.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ev.JobID == job || (job == "" && typ == events.TypeManifestEmitted && ev.Payload.(*events.ManifestEmitted).Kind == events.KindAB) {
			return m, ev
		}
	}
	t.Fatalf("no %s for %q on the stream", typ, job)
	return nil, events.Event{}
}

// TestAuditMixedBatchThenTampering: an honest mixed batch audits clean; then an altered
// verdict (deleted from the stream and republished with another raw winner) and an altered
// manifest blob are each reported, naming the job and the event.
func TestAuditMixedBatchThenTampering(t *testing.T) {
	env := NewEnv(t)
	env.Start(scriptedAll(t, nil), "all", bus.Services...)
	start := time.Now()
	sub := env.Submit(WriteBatch(t, auditMixedBatch()), e2eTenant)
	res := env.Wait(sub, 30*time.Second)
	if res.Summary.Total != 5 || res.Summary.Blocked != 1 {
		t.Fatalf("summary %+v", res.Summary)
	}

	rep := auditBatch(t, env, sub.BatchID)
	if !rep.OK() {
		t.Fatalf("honest batch: %d mismatches:%s", len(rep.Mismatches), auditDump(t, rep))
	}
	if rep.Jobs != 5 || rep.Events == 0 || rep.Decisions < 10 || len(rep.Batches) != 1 || !rep.Batches[0].Complete || rep.Batches[0].Digest == "" {
		t.Fatalf("honest batch report: %+v", rep)
	}
	// The same batch selected by time range.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byTime, err := audit.Run(ctx, env.JS(), audit.Filter{Since: start}, env.Store)
	if err != nil {
		t.Fatal(err)
	}
	if !byTime.OK() || len(byTime.Batches) != 1 || byTime.Batches[0].Digest != rep.Batches[0].Digest {
		t.Fatalf("audit by time range: %+v%s", byTime.Batches, auditDump(t, &byTime))
	}

	// (a) An altered verdict: the judge's answer for AC-1 now names the other slot.
	msg, ev := auditFind(t, env, events.TypeVerdictEmitted, "AC-1")
	p := ev.Payload.(*events.VerdictEmitted)
	if p.Votes[0].RawWinner == "A" {
		p.Votes[0].RawWinner = "B"
	} else {
		p.Votes[0].RawWinner = "A"
	}
	altered, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.stream().DeleteMsg(ctx, msg.Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS().PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: altered}, jetstream.WithMsgID("tampered-"+ev.ID)); err != nil {
		t.Fatal(err)
	}
	rep = auditBatch(t, env, sub.BatchID)
	found := false
	for _, m := range rep.Mismatches {
		if m.Job == "AC-1" && m.Kind == audit.KindMismatch && m.FromID == ev.ID && m.FromType == events.TypeVerdictEmitted && strings.HasPrefix(m.Field, "ab.") {
			found = true
		}
	}
	if !found || rep.Count(audit.KindOrder) == 0 || rep.Count(audit.KindID) == 0 {
		t.Fatalf("altered verdict: no mismatch naming AC-1 and verdict %s (want ab.* fields, an order and an id finding):%s", ev.ID, auditDump(t, rep))
	}

	// (b) An altered ab manifest: the blob behind the announcement is overwritten.
	_, mev := auditFind(t, env, events.TypeManifestEmitted, "")
	ref := mev.Payload.(*events.ManifestEmitted).Manifest
	path := filepath.Join(env.BlobDir, e2eTenant, "sha256", ref.SHA256[:2], ref.SHA256)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"pending_review"`), []byte(`"approved_by_me"`), 1)
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	rep = auditBatch(t, env, sub.BatchID)
	found = false
	for _, m := range rep.Mismatches {
		if m.Kind == audit.KindUnreadable && m.EventID == mev.ID && m.EventType == events.TypeManifestEmitted && strings.Contains(m.Detail, "ab manifest") {
			found = true
		}
	}
	if !found {
		t.Fatalf("altered manifest not reported as unreadable:%s", auditDump(t, rep))
	}
}

// TestAuditRubricViewAcrossRuns audits a rubric view in real Chromium that needs a fix in
// its first run and signs off in the second: the second batch's loop decisions can only
// be re-derived by folding the first batch's steps too (the view's loop carries over),
// which Replay returns as history.
func TestAuditRubricViewAcrossRuns(t *testing.T) {
	browsertest.Need(t)
	env := NewEnv(t)
	env.Start(scriptedRubric(t, map[string]any{viewJob: []any{failingVerdict("layout_spacing"), failingVerdict("none")}}), "all", bus.Services...)
	dir := rubricFeature(t, env, "")
	first := env.Wait(env.Submit(loadBatchDir(t, dir), e2eTenant), 60*time.Second)
	if first.Rows[0].Status != "needs_fixes" {
		t.Fatalf("run 1: %+v", first.Rows[0])
	}
	if rep := auditBatch(t, env, first.BatchID); !rep.OK() || rep.History != 0 {
		t.Fatalf("run 1: %d history events, mismatches:%s", rep.History, auditDump(t, rep))
	}
	second := env.Wait(env.Submit(loadBatchDir(t, dir), e2eTenant), 60*time.Second)
	if second.Rows[0].Status != "signed_off" {
		t.Fatalf("run 2: %+v", second.Rows[0])
	}
	rep := auditBatch(t, env, second.BatchID)
	if !rep.OK() {
		t.Fatalf("run 2: %d mismatches:%s", len(rep.Mismatches), auditDump(t, rep))
	}
	if rep.History == 0 || rep.Decisions < 5 {
		t.Fatalf("run 2: %d history events, %d decisions re-derived", rep.History, rep.Decisions)
	}
}
