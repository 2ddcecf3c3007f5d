package audit_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// collect replays what f selects into a slice.
func collect(ctx context.Context, js jetstream.JetStream, f audit.Filter) ([]audit.Recorded, error) {
	var recs []audit.Recorded
	err := audit.Replay(ctx, js, f, func(r *audit.Recorded) error {
		recs = append(recs, *r)
		return nil
	})
	return recs, err
}

func rubricSpec(job string) events.JobSpec {
	b := events.Blob{SHA256: strings.Repeat("ab", 32), MediaType: "application/json", Size: 2}
	return events.JobSpec{Kind: events.KindRubric, ACID: job, KindPart: &rubricwire.Spec{Feature: "tasks", Target: "list", State: "populated",
		Appearance: "light", Route: "http://127.0.0.1/", Adapter: "web", Mode: events.ModeHeadless, ReferenceStatus: "present",
		SpecJSON: b, SpecText: b, Tokens: b, Rubric: b}}
}

// TestAuditReplaySelects pins what Replay returns: a batch's events whole (a time range
// selects batches, never halves of them), undecodable messages unless attributed
// elsewhere, dead letters, other tenants only without a tenant filter, and the loop
// history of a selected rubric view from an earlier batch.
func TestAuditReplaySelects(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub := func(subject string, data []byte, id string) {
		t.Helper()
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	send := func(ev events.Event) events.Event {
		t.Helper()
		data, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		subject, _ := events.Subject(ev.Tenant, ev.Type)
		pub(subject, data, ev.ID)
		return ev
	}
	submit := func(tenant, batch, job string, spec events.JobSpec) events.Event {
		return send(events.New(&events.JobSubmitted{Spec: spec, BatchSize: 1}, tenant, batch, job, 0, "", nil))
	}
	verdict := func(tenant, batch, job string) events.Event {
		return send(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "p"}, Order: "AB", Status: "ok", RawWinner: "A", Confidence: 1, BiggestGap: "g"}}}, tenant, batch, job, 0, "", nil))
	}
	rubricVerdict := func(tenant, batch, job string) events.Event {
		return send(events.New(&events.VerdictEmitted{Kind: events.KindRubric, KindPart: &rubricwire.Vote{Judge: events.JudgeInfo{Provider: "p"}, Status: "ok", Verdict: "{}"}}, tenant, batch, job, 0, "", nil))
	}

	sub1 := submit("team-a", "b-1", "AC-1", abSpec("AC-1"))
	verdict("team-a", "b-1", "AC-1")
	submit("team-b", "b-1", "AC-1", abSpec("AC-1"))
	pub("tribunal.team-a.verdict.emitted", []byte{0xc1, 'x'}, "garbage")
	req := events.New(&events.RenderRequested{Spec: abSpec("AC-1")}, "team-a", "b-1", "AC-1", 0, "", &sub1.Envelope)
	data, _ := events.Encode(req)
	pub(events.DeadLetterSubject("renderer"), data, "dlq-renderer-"+req.ID)
	submit("team-a", "r-1", "view", rubricSpec("view"))
	rubricVerdict("team-a", "r-1", "view")
	submit("team-a", "x-1", "AC-9", abSpec("AC-9"))
	time.Sleep(30 * time.Millisecond)
	mid := time.Now()
	time.Sleep(30 * time.Millisecond)
	late := send(events.New(&events.JobBlocked{Kind: events.KindAB, ACID: "AC-1", Stage: "x", Reason: "y"}, "team-a", "b-1", "AC-1", 0, "", nil))
	submit("team-a", "b-2", "AC-1", abSpec("AC-1"))
	submit("team-a", "r-2", "view", rubricSpec("view"))

	type sel struct {
		batches map[string]int
		history []string
		garbage int
		dead    int
	}
	replay := func(f audit.Filter) sel {
		t.Helper()
		var recs []audit.Recorded
		reads, err := audit.ReplayReads(ctx, js, f, false, func(r *audit.Recorded) error {
			recs = append(recs, *r)
			return nil
		})
		planned := 2
		if !f.Since.IsZero() {
			planned = 3 // b-1 began before Since: the plan reads what precedes it too
		}
		if err != nil || reads != planned {
			t.Fatalf("%+v: %d reads, %v (want %d: plan, then deliver)", f, reads, err, planned)
		}
		// ReplayOwn hands over the same messages but the history, reading once without
		// a range (twice with one).
		var own, want []uint64
		for _, r := range recs {
			if !r.History {
				want = append(want, r.Seq)
			}
		}
		reads, err = audit.ReplayReads(ctx, js, f, true, func(r *audit.Recorded) error {
			own = append(own, r.Seq)
			return nil
		})
		if wantReads := map[bool]int{true: 1, false: planned}[f.Since.IsZero() && f.Until.IsZero()]; err != nil || reads != wantReads {
			t.Fatalf("%+v: ReplayOwn read %d times, %v (want %d)", f, reads, err, wantReads)
		}
		if fmt.Sprint(own) != fmt.Sprint(want) {
			t.Fatalf("%+v: ReplayOwn handed over %v, Replay %v but its history", f, own, want)
		}
		s := sel{batches: map[string]int{}}
		var last uint64
		for _, r := range recs {
			if r.Seq <= last {
				t.Fatalf("replay out of stream order at seq %d", r.Seq)
			}
			last = r.Seq
			switch {
			case !r.OK():
				s.garbage++
			case r.History:
				s.history = append(s.history, r.Event.BatchID+"/"+string(r.Event.Type))
			default:
				s.batches[r.Event.Tenant+"/"+r.Event.BatchID]++
				if r.DeadLetter != "" {
					s.dead++
				}
			}
		}
		return s
	}

	got := replay(audit.Filter{Tenant: "team-a", BatchID: "b-1"})
	if len(got.batches) != 1 || got.batches["team-a/b-1"] != 4 || got.garbage != 1 || got.dead != 1 || len(got.history) != 0 {
		t.Fatalf("batch b-1 of team-a: %+v", got)
	}
	got = replay(audit.Filter{BatchID: "b-1"})
	if got.batches["team-b/b-1"] != 1 || got.batches["team-a/b-1"] != 4 {
		t.Fatalf("batch b-1 of every tenant: %+v", got)
	}
	got = replay(audit.Filter{Tenant: "team-a", Since: mid})
	if got.batches["team-a/b-1"] != 4 || got.batches["team-a/b-2"] != 1 || got.batches["team-a/r-2"] != 1 || got.batches["team-a/x-1"] != 0 || got.garbage != 0 {
		t.Fatalf("since %s: %+v (b-1 must come whole, x-1 not at all)", mid, got)
	}
	if strings.Join(got.history, ",") != "r-1/job.submitted,r-1/verdict.emitted" {
		t.Fatalf("rubric view history %v, want r-1's submission and verdict", got.history)
	}
	got = replay(audit.Filter{Tenant: "team-a", Until: mid})
	if got.batches["team-a/b-1"] != 4 || got.batches["team-a/b-2"] != 0 || got.batches["team-a/r-1"] != 2 || got.batches["team-a/x-1"] != 1 {
		t.Fatalf("until %s: %+v (b-1 must come whole with its late %s)", mid, got, late.ID)
	}
	if recs, err := collect(ctx, js, audit.Filter{BatchID: "nope"}); err != nil || len(recs) != 0 {
		t.Fatalf("unknown batch: %d events, %v", len(recs), err)
	}
}

// TestRunAuditsTheStreamAsAuditDoesTheSlice: Run, which audits the stream while reading
// it, finds exactly what Audit finds over the same messages held in a slice, on a real
// stream holding a staged batch with a deleted render.done, a forged dead letter and an
// edited media type.
func TestRunAuditsTheStreamAsAuditDoesTheSlice(t *testing.T) {
	f := staged(t)
	f.drop(f.find(events.TypeRenderDone, "AC-1"))
	forged := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "x", Model: "x"},
		Order: "AB", Status: "ok", RawWinner: "A", Confidence: 1, BiggestGap: "x"}}}, f.tenant, f.batch, "AC-2", 0, "forged", nil)
	f.forgedDeadLetter(forged, "tribunal.team-x.verdict.emitted", false)

	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store(ctx, t, js, f.recs)
	key := func(m audit.Mismatch) string {
		return strings.Join([]string{string(m.Kind), m.Job, m.EventID, string(m.EventType), m.Field, m.FromID, m.Recorded, m.Derived}, "|")
	}
	keys := func(rep audit.Report) []string {
		var out []string
		for _, m := range rep.Mismatches {
			out = append(out, key(m))
		}
		sort.Strings(out)
		return out
	}
	want := f.audit()
	got, err := audit.Run(ctx, js, audit.Filter{Tenant: f.tenant, BatchID: f.batch}, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if want.OK() || strings.Join(keys(got), "\n") != strings.Join(keys(want), "\n") {
		t.Fatalf("Run found\n%s\nAudit found\n%s", strings.Join(keys(got), "\n"), strings.Join(keys(want), "\n"))
	}
	if got.Events != want.Events || got.Jobs != want.Jobs || got.Decisions != want.Decisions || got.Batches[0].Digest != want.Batches[0].Digest {
		t.Fatalf("Run: %d events, %d jobs, %d decisions, digest %s; Audit: %d, %d, %d, %s", got.Events, got.Jobs, got.Decisions, got.Batches[0].Digest,
			want.Events, want.Jobs, want.Decisions, want.Batches[0].Digest)
	}
}

// store publishes recorded messages on a stream again, as they were recorded.
func store(ctx context.Context, t *testing.T, js jetstream.JetStream, recs []audit.Recorded) {
	t.Helper()
	for _, r := range recs {
		m := &nats.Msg{Subject: r.Subject, Data: r.Raw, Header: nats.Header{}}
		if r.DeadLetter != "" {
			m.Header.Set(bus.MetaReason, r.Reason)
			m.Header.Set(bus.MetaOriginalSubject, r.OriginalSubject)
		}
		if r.Redrive != nil {
			m.Header.Set(bus.MetaRedriveJobs, bus.FormatRedriveJobs(r.Redrive))
		}
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(r.MsgID)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunPlacesCancelsFromTheFirstRead: Run works out where each raced cancel was
// applied during the replay's first read and applies it there during the second (one
// read ahead of the stream: a cancel applied before an input the stream holds earlier
// is kept from the first read), so the cancelled batch of TestAuditCancelRacesAreClean
// audits clean on a real stream; also when the audit starts at --since in the middle of
// the race, where the first read reads what precedes Since last. The state (the header
// with its plan and cancel, each job record) agrees.
func TestRunPlacesCancelsFromTheFirstRead(t *testing.T) {
	f := cancelled(t)
	split := -1
	for i, r := range f.recs {
		if _, ok := r.Event.Payload.(*events.BatchCancelRequested); ok && split < 0 {
			split = i
		}
	}
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store(ctx, t, js, f.recs[:split])
	time.Sleep(50 * time.Millisecond)
	since := time.Now()
	time.Sleep(50 * time.Millisecond)
	store(ctx, t, js, f.recs[split:])
	for _, flt := range []audit.Filter{{Tenant: f.tenant, BatchID: f.batch}, {Since: since}} {
		rep, err := audit.Run(ctx, js, flt, f.store)
		if err != nil {
			t.Fatal(err)
		}
		// The header keeps the plan and the cancel; every record what its cancel decided.
		h := f.header()
		if h.Plan == nil || h.Cancel == nil || h.Completion == nil {
			t.Fatalf("header %+v", h)
		}
		audit.CheckState(&rep, h, f.agg.Jobs(f.tenant, f.batch))
		if !rep.OK() || len(rep.Batches) != 1 || !rep.Batches[0].Complete || rep.Batches[0].Summary.Blocked != 3 {
			t.Fatalf("%+v: %+v%s", flt, rep.Batches, dump(rep))
		}
	}
}

// TestAuditReplayOnCluster: on a three-node cluster with the stream replicated, where
// every pull of the replay's ordered consumer recreates it, possibly on another server:
// after a server restarts, a pull can arrive before the consumer's interest has ("no
// responders"). The replay repeats such a pull and returns every event of the batch.
func TestAuditReplayOnCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	var evs []events.Event
	for i := range n {
		job := "AC-" + strconv.Itoa(i)
		evs = append(evs, events.New(&events.JobSubmitted{Spec: abSpec(job), BatchSize: n}, "default", "b-1", job, 0, "", nil))
	}
	if err := bus.NewPublisher(js).PublishEvents(evs...); err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		if round%2 == 1 {
			// After a restart of its leader the stream is leaderless for a few seconds
			// and requests go unanswered; the replay starts once it has one again.
			c.Restart(t, round/2)
			for {
				ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.Stream(ictx, "TRIBUNAL")
				icancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("round %d: the stream has no leader after a restart: %v", round, err)
				}
			}
		}
		recs, err := collect(ctx, js, audit.Filter{BatchID: "b-1"})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(recs) != n {
			t.Fatalf("round %d: %d events replayed, want %d", round, len(recs), n)
		}
	}
}
