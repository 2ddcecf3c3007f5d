package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestReviewRubricThroughTheServices: a rubric view signed off by its loop is in the
// batch's review queue (a sample of one); its item shows exactly the call of the verdict
// reviewed (the view's last judged iteration: the rubric, tokens, spec, probe, the render
// and the reference), no AC id, and asks for the view's rubric dimensions. An answer
// outside the judge's verdict schema is refused before anything is published; a valid
// one is recorded beside the judge's verdict, changes no outcome, and the audit
// re-derives the batch clean; agreement is measured per dimension.
func TestReviewRubricThroughTheServices(t *testing.T) {
	browsertest.Need(t)
	env := NewEnv(t)
	env.Start(scriptedRubric(t, nil), "all", bus.Services...)
	dir := rubricFeature(t, env, "")
	os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte("version: 1\nname: rubric\nreview: {count: 1, seed: s}\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json}\n"), 0o644)
	res := env.Wait(env.Submit(loadBatchDir(t, dir), e2eTenant), 60*time.Second)
	if res.Rows[0].Status != "signed_off" {
		t.Fatalf("row %+v", res.Rows[0])
	}
	WaitBatchCompleted(t, env.JS(), e2eTenant, res.BatchID)
	r := env.clientRunning()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, _, err := client.ReviewQueue(ctx, r.Buckets, e2eTenant, res.BatchID)
	if err != nil || len(q) != 1 || q[0].AC != viewJob || q[0].Reasons[0] != "sample" {
		t.Fatalf("queue %+v, %v", q, err)
	}
	it, err := client.ReviewItemOf(ctx, env.Store, q[0])
	if err != nil || it.Missing != "" {
		t.Fatalf("item %+v, %v", it, err)
	}
	var text strings.Builder
	images := 0
	for _, p := range it.Shown {
		text.WriteString(p.Text)
		if p.Image != nil {
			images++
		}
	}
	if images < 2 || !strings.Contains(text.String(), "RUBRIC") || !strings.Contains(text.String(), "PROBE") || strings.Contains(text.String(), viewJob) {
		t.Fatalf("the item does not show what the judge saw, blind: %d images, text %q", images, text.String())
	}
	if !strings.Contains(it.Answer, `"layout_spacing": {"score": "0 | 0.5 | 1", "anchor": "design-system"`) {
		t.Fatalf("answer shape %s", it.Answer)
	}
	bad, _ := json.Marshal(RubricVerdict(map[string]float64{"typography": 0.25}, true, nil))
	if err := client.RecordReview(r.Pub, q[0], bad, "ann@team-a", "import"); err == nil || !strings.Contains(err.Error(), "dimensions.typography.score") {
		t.Fatalf("an answer outside the verdict schema: %v", err)
	}
	answer, _ := json.Marshal(RubricVerdict(map[string]float64{"typography": 0.5}, true, []string{}))
	if err := client.RecordReview(r.Pub, q[0], answer, "ann@team-a", "import"); err != nil {
		t.Fatal(err)
	}
	var rec *records.Job
	poll.Until(t, 20*time.Second, "the review recorded on the view", func() (bool, string) {
		rec, _ = client.FindJob(ctx, r.Buckets, e2eTenant, res.BatchID, viewJob)
		return rec != nil && len(rec.Reviews) == 1, "not yet"
	})
	rv := rec.Reviews[0]
	if rv.Judge.Label != "pass" || rv.Person.Label != "fail" || rv.Person.Scores["typography"] != 1 || rv.Decides || rec.Status != "signed_off" || rec.DecidedBy == rv.Event {
		t.Fatalf("review %+v, job %s decided by %s", rv, rec.Status, rec.DecidedBy)
	}
	poll.Until(t, 20*time.Second, "the reviewed rubric batch audited clean", func() (bool, string) {
		rep := auditBatch(t, env, res.BatchID)
		return rep.OK(), auditDump(t, rep)
	})
	jobs, err := records.New(r.Buckets).LoadJobs(ctx, e2eTenant, res.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	people, err := client.ReviewAgreement(jobs, 1)
	if err != nil || people == nil || len(people.Agreement) != 1 {
		t.Fatalf("agreement %+v, %v", people, err)
	}
	a := people.Agreement[0]
	if a.Kind != "rubric" || a.Lenient != 1 || len(a.Scores) != 7 || len(a.Disagreements) != 1 {
		t.Fatalf("agreement %+v", a)
	}
	for _, s := range a.Scores {
		if s.Dimension == "typography" && (s.Higher != 1 || s.MeanAbsDiff.Point != 0.5) {
			t.Fatalf("typography %+v", s)
		}
	}

	// The review edited on the stream (the person's typography made 1) is caught: its id
	// is not its step's, and the review derived from it no longer matches the record.
	msg, ev := auditFind(t, env, events.TypeReviewRecorded, viewJob)
	edited, _ := json.Marshal(RubricVerdict(nil, true, []string{}))
	ev.Payload.(*events.ReviewRecorded).Answer = string(edited)
	data, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.stream().DeleteMsg(ctx, msg.Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS().PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: data}, jetstream.WithMsgID("tampered-"+ev.ID)); err != nil {
		t.Fatal(err)
	}
	rep := auditBatch(t, env, res.BatchID)
	idFound, derived := false, false
	for _, m := range rep.Mismatches {
		if m.Job == viewJob && m.Kind == audit.KindID && m.EventType == events.TypeReviewRecorded {
			idFound = true
		}
		if m.Job == viewJob && m.Kind != audit.KindID {
			derived = true
		}
	}
	if !idFound || !derived {
		t.Fatalf("edited rubric review.recorded not caught (id %v, derived %v):%s", idFound, derived, auditDump(t, rep))
	}
}
