package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// rewriteWire decodes an event's msgpack wire form generically, sets one top-level field
// (see pkg/events/codec.go's wire: "v", "tenant", ...) and encodes it again.
func rewriteWire(t *testing.T, data []byte, field string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := msgpack.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[field]; !ok {
		t.Fatalf("wire form has no field %q: %v", field, m)
	}
	m[field] = value
	out, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMalformedEventsDeadLettered: undecodable input on a subject a service consumes
// (garbage bytes, an unknown schema version, no tenant) goes to that service's dead
// letters on the first delivery with a reason naming the field, and the batch running at
// the same time is not disturbed.
func TestMalformedEventsDeadLettered(t *testing.T) {
	env := NewEnv(t)
	env.Start(scriptedJudge(t, "A"), "judge-1", bus.Services...)
	sub := env.Submit(WriteBatch(t, TextBatch(20, "")), e2eTenant)

	subject, err := events.Subject(e2eTenant, events.TypeRenderRequested)
	if err != nil {
		t.Fatal(err)
	}
	spec := events.JobSpec{Kind: events.KindAB, ACID: "AC-evil", KindPart: &ab.Spec{
		Ours: events.Source{Name: "a", Error: "x"}, Reference: events.Source{Name: "b", Error: "x"}, Threshold: 0.5}}
	valid, err := events.Encode(events.New(&events.RenderRequested{Spec: spec}, e2eTenant, "evil-batch", "AC-evil", 0, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Decode(rewriteWire(t, valid, "v", 1)); err != nil {
		t.Fatalf("the rewrite itself breaks events: %v", err)
	}
	cases := []struct {
		id     string
		data   []byte
		reason []string
	}{
		// 0xc1 is the one byte msgpack never uses.
		{"evil-garbage", []byte{0xc1, 'g', 'a', 'r', 'b', 'a', 'g', 'e', 0xff}, []string{"malformed", "envelope"}},
		{"evil-version", rewriteWire(t, valid, "v", events.SchemaVersion+98), []string{"envelope.v", "unknown event schema version"}},
		{"evil-tenant", rewriteWire(t, valid, "tenant", ""), []string{"envelope.tenant", "missing"}},
	}
	nc := env.Conn()
	for _, c := range cases {
		m := &nats.Msg{Subject: subject, Data: c.data, Header: nats.Header{}}
		m.Header.Set(nats.MsgIdHdr, c.id)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	res := env.Wait(sub, 30*time.Second)
	if res.Summary.Total != 20 || res.Summary.Compared != 20 || len(res.Rows) != 20 {
		t.Fatalf("batch disturbed by malformed events: summary %+v, %d rows", res.Summary, len(res.Rows))
	}

	dlq := events.DeadLetterSubject(bus.Renderer)
	poll.Until(t, 10*time.Second, "three dead letters", func() (bool, string) {
		n := env.subjectCount(dlq)
		return n >= 3, fmt.Sprintf("%d on %s", n, dlq)
	})
	dls := env.subjectMsgs(dlq)
	if len(dls) != 3 {
		t.Fatalf("%d dead letters on %s, want 3", len(dls), dlq)
	}
	byID := map[string]int{}
	for _, dl := range dls {
		byID[dl.Header.Get(bus.MetaOriginalID)]++
	}
	for _, c := range cases {
		if byID[c.id] != 1 {
			t.Errorf("%s: %d dead letters, want 1 (by original id: %v)", c.id, byID[c.id], byID)
			continue
		}
		for _, dl := range dls {
			if dl.Header.Get(bus.MetaOriginalID) != c.id {
				continue
			}
			reason := dl.Header.Get(bus.MetaReason)
			t.Logf("%s: dead-lettered: %s", c.id, reason)
			for _, want := range c.reason {
				if !strings.Contains(reason, want) {
					t.Errorf("%s: reason %q does not contain %q", c.id, reason, want)
				}
			}
			if got := dl.Header.Get(bus.MetaOriginalSubject); got != subject {
				t.Errorf("%s: original subject %q, want %q", c.id, got, subject)
			}
			if !bytes.Equal(dl.Data, c.data) {
				t.Errorf("%s: dead letter payload differs from what was published", c.id)
			}
		}
	}
	// Nothing else went to any dead letters, nothing of the evil batch went further, and
	// every malformed message was settled (no redelivery loop).
	if n := env.subjectCount(events.DeadLetterPrefix + ".>"); n != 3 {
		t.Errorf("%d dead letters in all, want 3", n)
	}
	if n := env.subjectCount(events.AnyTenant(events.TypeRenderDone)); n != 20 {
		t.Errorf("%d render.done events, want 20", n)
	}
	js := env.JS()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, "TRIBUNAL", bus.ConsumerName(bus.Renderer))
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the renderer's consumer to settle", func() (bool, string) {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0,
			fmt.Sprintf("pending %d ack pending %d redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
	})
}
