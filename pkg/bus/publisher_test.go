package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestPublishRefusesPreemptedID: message-id poisoning. Someone publishes junk under the
// Nats-Msg-Id of an event that is yet to come (ids are deterministic and the stream's
// duplicate window is stream-wide); when the real event is published the server answers
// Duplicate and does not store it. The publisher reads the stored message back and fails
// loudly, naming both, instead of reporting the lost event as published. (On f5dc4e7 the
// publisher ignored the Duplicate flag: team-b's verdict was silently dropped and its
// batch never completed.)
func TestPublishRefusesPreemptedID(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx := ctxT(t)
	pub := bus.NewPublisher(js)
	victim := renderEvent("AC-1")
	victimSubject, _ := events.Subject(victim.Tenant, victim.Type)

	cases := []struct {
		name, subject string
		data          func(ev events.Event) []byte
		wantDiff      string
	}{
		{"junk on another subject", "tribunal.team-b.job.submitted", func(events.Event) []byte { return []byte("junk") }, "the subject"},
		{"junk on the same subject", victimSubject, func(events.Event) []byte { return []byte("junk") }, "the payload"},
		{"another tenant's event on the same subject", victimSubject, func(ev events.Event) []byte {
			forged := ev
			forged.Tenant = "team-b"
			data, err := events.Encode(forged)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}, "the tenant"},
		{"another job's event under the id", victimSubject, func(ev events.Event) []byte {
			other := ev
			other.JobID = "AC-9"
			other.Payload = renderEvent("AC-9").Payload
			data, err := events.Encode(other)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}, "the job"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case poisons the id of an event of its own batch.
			ev := victim
			ev.BatchID = "batch-" + string(rune('a'+i))
			ev.ID = events.NewID(ev.Type, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "")
			data := c.data(ev)
			if _, err := js.Publish(ctx, c.subject, data, jetstream.WithMsgID(ev.ID)); err != nil {
				t.Fatal(err)
			}
			err := pub.PublishEvents(ev)
			if !errors.Is(err, bus.ErrDuplicateMismatch) {
				t.Fatalf("publishing over a pre-empted id: %v, want ErrDuplicateMismatch", err)
			}
			for _, want := range []string{ev.ID, c.subject, victimSubject, c.wantDiff + " differs"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}

	// The legitimate duplicate: the same event built again by a redelivered handler (a
	// later time, so other bytes) is still success.
	ev := renderEvent("AC-2")
	if err := pub.PublishEvents(ev); err != nil {
		t.Fatal(err)
	}
	again := renderEvent("AC-2")
	if again.Time.Equal(ev.Time) {
		again.Time = again.Time.Add(1)
	}
	if err := pub.PublishEvents(again); err != nil {
		t.Fatalf("republishing the same event: %v", err)
	}
	// A payload that is no event matches only byte for byte.
	raw := message.NewMessage("raw-1", []byte("not an event"))
	raw.Metadata.Set(bus.MetaSubject, "tribunal._dlq.judge")
	for range 2 {
		if err := pub.Publish("", raw); err != nil {
			t.Fatalf("republishing the same raw message: %v", err)
		}
	}
	other := message.NewMessage("raw-1", []byte("other bytes"))
	other.Metadata.Set(bus.MetaSubject, "tribunal._dlq.judge")
	if err := pub.Publish("", other); !errors.Is(err, bus.ErrDuplicateMismatch) {
		t.Fatalf("other bytes under a used id: %v, want ErrDuplicateMismatch", err)
	}
}

// TestPublishTrustsOwnDuplicates: a publisher told to trust its service's subjects
// (TrustDuplicatesOf, the judge's in a deployment) takes a Duplicate there for success
// without reading the stream, which its NATS user may not: a redelivered judge
// republishing its verdict meets no permission violation. On any other subject it still
// reads back and refuses a pre-empted id.
func TestPublishTrustsOwnDuplicates(t *testing.T) {
	ns := natstest.StartConfig(t, `accounts { TRIBUNAL { jetstream: enabled
users: [
  {user: op, password: op}
  {user: judge, password: judge, permissions: {publish: {allow: ["tribunal.*.verdict.emitted", "tribunal._dlq.judge"]}, subscribe: {allow: ["_INBOX_judge.>"]}}}
] } }
`)
	op, err := nats.Connect(ns.ClientURL(), nats.UserInfo("op", "op"))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	opJS, _ := jetstream.New(op)
	ctx := ctxT(t)
	if err := bus.Provision(ctx, opJS, bus.Config{Memory: true}); err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 16)
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("judge", "judge"), nats.CustomInboxPrefix("_INBOX_judge"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	pub := bus.NewPublisher(js, bus.TrustDuplicatesOf(bus.Judge))

	verdict := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "p"}, Order: "AB", Status: "ok", RawWinner: "A", Confidence: 1, BiggestGap: "g"}}}, testTenant, "batch-1", "AC-1", 0, "", nil)
	for range 2 {
		if err := pub.PublishEvents(verdict); err != nil {
			t.Fatalf("the judge republishing its verdict: %v", err)
		}
	}
	if n := natstest.SubjectCount(t, opJS, "tribunal.*.verdict.emitted"); n != 1 {
		t.Errorf("%d verdicts stored, want 1", n)
	}
	// Its dead letters likewise: a message dead-lettered again after a lost ack.
	dead := message.NewMessage("dlq-judge-1", []byte("the original payload"))
	dead.Metadata.Set(bus.MetaSubject, events.DeadLetterSubject(bus.Judge))
	for range 2 {
		if err := pub.Publish("", dead); err != nil {
			t.Fatalf("the judge dead-lettering again: %v", err)
		}
	}
	nc.Flush()
	select {
	case err := <-violations:
		t.Errorf("the judge's publisher: %v", err)
	default:
	}
	// Another service's subject is read back as ever: a pre-empted id there fails.
	trusting := bus.NewPublisher(opJS, bus.TrustDuplicatesOf(bus.Judge))
	req := renderEvent("AC-1")
	if _, err := opJS.Publish(ctx, "tribunal.team-a.render.requested", []byte("junk"), jetstream.WithMsgID(req.ID)); err != nil {
		t.Fatal(err)
	}
	if err := trusting.PublishEvents(req); !errors.Is(err, bus.ErrDuplicateMismatch) {
		t.Errorf("a pre-empted id on the aggregator's subject: %v, want ErrDuplicateMismatch", err)
	}
}
