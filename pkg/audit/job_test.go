package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
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
