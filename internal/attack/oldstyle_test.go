package attack

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// The tests in this file run attacks against the kind of authorization f5dc4e7's
// `tribunal tenants` wrote, one NATS user per team allowed on its own ingress subjects,
// to show each attack path was real; the tests of attack_test.go show the same attempts
// failing today.

// oldStyle is a nats-server with f5dc4e7's authorization: an all-powerful services user
// and one user per team publishing its own ingress subjects and reading its own
// subjects and inbox.
type oldStyle struct {
	url  string
	opJS jetstream.JetStream
}

func startOldStyle(t *testing.T) *oldStyle {
	t.Helper()
	var users strings.Builder
	users.WriteString(`{user: "services", password: "services-pw", permissions: {publish: {allow: [">"]}, subscribe: {allow: [">"]}}}` + "\n")
	for _, team := range teams {
		subj := func(t events.Type) string { s, _ := events.Subject(team, t); return s }
		fmt.Fprintf(&users, `{user: %q, password: "pw", permissions: {publish: {allow: [%q, %q, %q, "tribunalq.%s.>"]}, subscribe: {allow: [%q, "_INBOX_%s.>"]}}}`+"\n",
			team, subj(events.TypeJobSubmitted), subj(events.TypeRenderRequested), subj(events.TypeSpotcheckRecorded), team, events.TenantAll(team), team)
	}
	ns := natstest.StartConfig(t, "accounts { TRIBUNAL { jetstream: enabled\nusers: [\n"+users.String()+"] } }\n")
	o := &oldStyle{url: ns.ClientURL()}
	op, err := nats.Connect(o.url, nats.UserInfo("services", "services-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	o.opJS, _ = jetstream.New(op)
	if err := bus.Provision(ctxT(t), o.opJS, bus.Config{Memory: true}); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *oldStyle) team(t *testing.T, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(o.url, nats.UserInfo(name, "pw"), nats.CustomInboxPrefix("_INBOX_"+name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestOldStyleReplyReflection: on f5dc4e7's authorization team-a, publishing only on its
// own subject, named team-b's job record as the reply subject; JetStream wrote its
// acknowledgement there from inside the account and the record became
// {"stream":"TRIBUNAL","seq":N}. Today a team holds no NATS user to publish with
// (TestTokenReachesNoNATS).
func TestOldStyleReplyReflection(t *testing.T) {
	o := startOldStyle(t)
	ctx := ctxT(t)
	jobs, err := o.opJS.KeyValue(ctx, bus.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	const key = "team-b.batch-1.AC-1"
	if _, err := jobs.Put(ctx, key, []byte(`{"tenant":"team-b","status":"pending"}`)); err != nil {
		t.Fatal(err)
	}
	a := o.team(t, "team-a")
	own, _ := events.Subject("team-a", events.TypeJobSubmitted)
	if err := a.PublishMsg(&nats.Msg{Subject: own, Reply: "$KV." + bus.BucketJobs + "." + key, Data: []byte("anything")}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, err := jobs.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var ack struct {
			Stream string `json:"stream"`
			Seq    uint64 `json:"seq"`
		}
		if json.Unmarshal(e.Value(), &ack) == nil && ack.Stream == "TRIBUNAL" && ack.Seq > 0 {
			return // the path was real: team-b's record is now JetStream's acknowledgement
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reflection did not reach team-b's record (%s): the f5dc4e7 attack path is not reproduced", e.Value())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOldStyleMessageIDPoisoning: on f5dc4e7's authorization team-a published junk on its
// own subject under the message id of team-b's future verdict; the stream then dropped
// the real verdict as a duplicate, and f5dc4e7's publisher reported success. Today's
// publisher reads the stored message back and fails, naming both; and a team can no
// longer publish at all (TestMessageIDPoisoning).
func TestOldStyleMessageIDPoisoning(t *testing.T) {
	o := startOldStyle(t)
	verdict := events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-1", Blocked: "stands in for team-b's verdict"}, "team-b", "batch-1", "AC-1", 0, "", nil)
	a := o.team(t, "team-a")
	ajs, _ := jetstream.New(a)
	own, _ := events.Subject("team-a", events.TypeJobSubmitted)
	if _, err := ajs.Publish(ctxT(t), own, []byte("junk"), jetstream.WithMsgID(verdict.ID)); err != nil {
		t.Fatalf("team-a's poisoning publish: %v", err)
	}
	err := bus.NewPublisher(o.opJS).PublishEvents(verdict)
	if !errors.Is(err, bus.ErrDuplicateMismatch) {
		t.Fatalf("publishing the real event over the poisoned id: %v, want ErrDuplicateMismatch", err)
	}
	st, _ := o.opJS.Stream(ctxT(t), "TRIBUNAL")
	subj, _ := events.Subject("team-b", events.TypeGatesFailed)
	if _, err := st.GetLastMsgForSubject(ctxT(t), subj); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the real event was stored after all: %v", err)
	}
}

// TestOldStyleForeignEnvelope: on f5dc4e7's authorization team-a's user could put an
// envelope naming team-b on its own subject; the stream stored it for the services to
// act on (f5dc4e7's dead-letter handler then did, for team-b). Today no team can publish,
// and the services refuse such an event (TestForeignEnvelopesActForNobody).
func TestOldStyleForeignEnvelope(t *testing.T) {
	o := startOldStyle(t)
	spec := events.JobSpec{Kind: events.KindAB, ACID: "AC-1", Criterion: "c", KindPart: &ab.Spec{
		Ours: events.Source{Name: "o", Error: "missing artifact: o"}, Reference: events.Source{Name: "r", Error: "missing artifact: r"}, Threshold: 0.75}}
	forged := events.New(&events.JobSubmitted{Spec: spec, BatchSize: 1}, "team-b", "fake-batch", "AC-1", 0, "", nil)
	data, err := events.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	a := o.team(t, "team-a")
	ajs, _ := jetstream.New(a)
	own, _ := events.Subject("team-a", events.TypeJobSubmitted)
	if _, err := ajs.Publish(ctxT(t), own, data); err != nil {
		t.Fatalf("team-a publishing team-b's envelope on its own subject: %v", err)
	}
	st, _ := o.opJS.Stream(ctxT(t), "TRIBUNAL")
	msg, err := st.GetLastMsgForSubject(ctxT(t), own)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := events.Decode(msg.Data); err != nil || ev.Tenant != "team-b" {
		t.Fatalf("stored %v %v", ev.Tenant, err)
	}
}
