package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// stream publishes the fixture's stream to a real JetStream stream, in order.
func (f *fixture) stream(ctx context.Context) jetstream.JetStream {
	f.t.Helper()
	_, _, js := natstest.Provisioned(f.t, bus.Config{Memory: true})
	for _, r := range f.recs {
		m := &nats.Msg{Subject: r.Subject, Data: r.Raw, Header: nats.Header{}}
		if r.Reason != "" {
			m.Header.Set(bus.MetaReason, r.Reason)
		}
		if len(r.ChainSeqs) > 0 {
			m.Header.Set(bus.MetaChainSeqs, bus.FormatChainSeqs(r.ChainSeqs))
		}
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(r.MsgID)); err != nil {
			f.t.Fatal(err)
		}
	}
	return js
}

// TestAuditOneJob pins the audit of one AC (RunJob): it re-derives that job's decisions
// from its own events alone, finds what was altered in them, and is not told of another
// job's alteration (whose id, AC-1, is a prefix of this one's, AC-10).
func TestAuditOneJob(t *testing.T) {
	f := newFixture(t)
	f.abJob("AC-1", 0, 3, ab.Assign("AC-1", 0).Label(ab.WinnerReference), 0.9)
	f.abJob("AC-10", 1, 3, "tie", 0.4)
	f.deadLettered("AC-3", 2, 3)
	f.forgeWinner(f.find(events.TypeIterationDecided, "AC-1"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := f.stream(ctx)
	filter := audit.Filter{Tenant: f.tenant, BatchID: f.batch}

	for _, job := range []string{"AC-10", "AC-3"} {
		rep, err := audit.RunJob(ctx, js, filter, job, f.store)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || rep.Jobs != 1 || rep.Job != job || rep.Decisions == 0 {
			t.Fatalf("%s: want a clean audit of one job, got jobs %d, decisions %d: %s", job, rep.Jobs, rep.Decisions, dump(rep))
		}
	}
	rep, err := audit.RunJob(ctx, js, filter, "AC-1", f.store)
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMismatch && m.Job == "AC-1" && m.Field == "ab.winner" && m.Recorded == `"ours"`
	}) {
		t.Fatalf("no ab.winner mismatch for AC-1: %s", dump(rep))
	}
	for _, m := range rep.Mismatches {
		if m.Job != "AC-1" {
			t.Fatalf("a finding about another job than AC-1: %s", m)
		}
	}
	// A window its record's clocks got wrong narrows nothing that decides the job: one
	// that starts after every event is read again from the start, one that ends before
	// them all still reads on to the outcome.
	for _, w := range []audit.Window{{From: time.Now().Add(time.Hour)}, {To: time.Unix(0, 0)}} {
		rep, err := audit.RunJobIn(ctx, js, filter, "AC-1", f.store, w)
		if err != nil {
			t.Fatal(err)
		}
		if !has(rep, func(m audit.Mismatch) bool { return m.Job == "AC-1" && m.Field == "ab.winner" }) {
			t.Fatalf("window %+v: no ab.winner mismatch for AC-1: %s", w, dump(rep))
		}
	}
	if _, err := audit.RunJob(ctx, js, audit.Filter{Tenant: f.tenant}, "AC-1", f.store); err == nil {
		t.Fatal("one job's audit without its batch: want an error")
	}
}

// chainedABJob is abJob as the pipeline records it: the verdict chains the render
// request it answers (events.Envelope.Chain), and its header says where the stream
// holds it (bus.MetaChainSeqs), as the stages' router sets it.
func (f *fixture) chainedABJob(id string, index, size int) {
	f.t.Helper()
	spec := abSpec(id)
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: index, BatchSize: size}, f.tenant, f.batch, id, 0, "", nil)
	f.in(sub)
	req := f.recs[f.find(events.TypeRenderRequested, id)]
	raw := ab.Assign(id, 0).Label(ab.WinnerReference)
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok", RawWinner: raw, Confidence: 0.9, BiggestGap: "the headings"}}
	v := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", &req.Event.Envelope)
	v.Chain = events.ChainOf(req.Event.Envelope, req.SHA256)
	r := f.publish(v)
	i := len(f.recs) - 1
	f.recs[i].ChainSeqs = []uint64{req.Seq}
	f.apply(r, rulebook.Input{Event: v, Link: link(r), Subject: r.Subject, Seq: r.Seq, ChainSeqs: f.recs[i].ChainSeqs})
}

// positionsOf is where job's record says its events are: the links and stream
// positions of the events its decision rests on, as the batch's audit re-derives them.
func positionsOf(t *testing.T, rep audit.Report, job string) audit.Window {
	t.Helper()
	for _, d := range rep.JobDecisions() {
		if d.Job != job {
			continue
		}
		w := audit.Window{To: time.Now()}
		for _, in := range d.Inputs {
			w.Links = append(w.Links, in.ID+":"+in.SHA256)
			w.Positions = append(w.Positions, in.Seq)
		}
		return w
	}
	t.Fatalf("no decision of %s: %s", job, dump(rep))
	return audit.Window{}
}

// TestAuditOneJobAtItsPositions pins the audit of one AC from its record's positions
// (records.Job.Positions): the last AC of a batch is read at them and its outcome after
// them, not by passing over the stream, and audits clean; a position that names another
// message is a finding and the job is read from the stream instead; an altered decision
// is found all the same.
func TestAuditOneJobAtItsPositions(t *testing.T) {
	f := newFixture(t)
	const n = 40
	for i := range n {
		f.chainedABJob(fmt.Sprintf("AC-%d", i), i, n)
	}
	last := fmt.Sprintf("AC-%d", n-1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := f.stream(ctx)
	filter := audit.Filter{Tenant: f.tenant, BatchID: f.batch}
	whole, err := audit.Run(ctx, js, filter, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if !whole.OK() {
		t.Fatalf("the batch: %s", dump(whole))
	}
	w := positionsOf(t, whole, last)
	// The submission, the render request and the verdict.
	if len(w.Positions) != 3 {
		t.Fatalf("want 3 positions of %s, got %v", last, w.Positions)
	}

	rep, err := audit.RunJobIn(ctx, js, filter, last, f.store, w)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Jobs != 1 || rep.Decisions == 0 {
		t.Fatalf("want a clean audit of %s, got jobs %d, decisions %d: %s", last, rep.Jobs, rep.Decisions, dump(rep))
	}
	// Three by sequence and the outcome, the first of its subject after the verdict:
	// nothing of the stream's other messages.
	if rep.Read > len(w.Positions)+1 {
		t.Fatalf("read %d messages for %d positions and the outcome (the stream holds %d)", rep.Read, len(w.Positions), len(f.recs))
	}
	scan, err := audit.RunJob(ctx, js, filter, last, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if !scan.OK() || scan.Read < len(f.recs) {
		t.Fatalf("without positions: want a clean audit over the whole stream (%d messages), read %d: %s", len(f.recs), scan.Read, dump(scan))
	}

	// A record whose position names another job's verdict.
	moved := w
	moved.Positions = append([]uint64(nil), w.Positions...)
	moved.Positions[2] = positionsOf(t, whole, "AC-0").Positions[2]
	rep, err = audit.RunJobIn(ctx, js, filter, last, f.store, moved)
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, func(m audit.Mismatch) bool { return m.Job == last && m.Field == "positions[2]" }) || len(rep.Mismatches) != 1 {
		t.Fatalf("want one finding, positions[2] of %s: %s", last, dump(rep))
	}
	if rep.Read < len(f.recs) {
		t.Fatalf("a misplaced position: want the job read over the stream, read %d of %d", rep.Read, len(f.recs))
	}
}

// TestAuditOneJobAtItsPositionsFindsTampering alters what the positions lead to: a
// decision edited after it was taken, and a verdict whose bytes changed. Each is found
// as without positions.
func TestAuditOneJobAtItsPositionsFindsTampering(t *testing.T) {
	f := newFixture(t)
	const n = 6
	for i := range n {
		f.chainedABJob(fmt.Sprintf("AC-%d", i), i, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	filter := audit.Filter{Tenant: f.tenant, BatchID: f.batch}
	clean, err := audit.Run(ctx, f.stream(ctx), filter, f.store)
	if err != nil {
		t.Fatal(err)
	}
	w4, w5 := positionsOf(t, clean, "AC-4"), positionsOf(t, clean, "AC-5")
	f.forgeWinner(f.find(events.TypeIterationDecided, "AC-4"))
	f.rewrite(f.find(events.TypeVerdictEmitted, "AC-5"), func(ev *events.Event) {
		ev.Payload.(*events.VerdictEmitted).Votes[0].Confidence = 0.1
	})
	js := f.stream(ctx)
	rep, err := audit.RunJobIn(ctx, js, filter, "AC-4", f.store, w4)
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, func(m audit.Mismatch) bool { return m.Job == "AC-4" && m.Field == "ab.winner" }) {
		t.Fatalf("AC-4: no ab.winner mismatch: %s", dump(rep))
	}
	rep, err = audit.RunJobIn(ctx, js, filter, "AC-5", f.store, w5)
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, func(m audit.Mismatch) bool { return m.Job == "AC-5" && m.Field == "positions[2]" }) || rep.OK() {
		t.Fatalf("AC-5: its verdict's bytes changed: want positions[2] reported: %s", dump(rep))
	}
}
