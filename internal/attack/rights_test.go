package attack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// The tests in this file try, as each generated NATS user, the rights the outside
// review of issue 23 found it held beyond docs/security.md's table (item 6): NATS must
// refuse each one as a permissions violation, and the victim's batch must complete with
// a clean audit. Their comments say how each attempt worked on de157a3, before the
// users were cut to the table.

// rightsUser is a connection as one generated user that is the attacker's, not the
// world's: its permission violations are the refusals a test expects.
type rightsUser struct {
	t    *testing.T
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

func (w *world) rightsUser(user string) *rightsUser {
	w.t.Helper()
	errs := make(chan error, 64)
	nc, err := nats.Connect(w.ns.ClientURL(), nats.UserInfo(user, w.passwords[user]), nats.CustomInboxPrefix(tenants.InboxPrefix(user)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		w.t.Fatalf("connect %s: %v", user, err)
	}
	w.t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return &rightsUser{t: w.t, user: user, nc: nc, js: js, errs: errs}
}

// refused sends data to subject as a request (a reply inbox of the user's own, as a
// client's request carries) and checks that NATS refused the publish: a permissions
// violation naming the subject. A refused publish reaches nobody, so nothing answers.
func (u *rightsUser) refused(what, subject string, data []byte) {
	u.t.Helper()
	if err := u.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: u.nc.NewRespInbox(), Data: data}); err != nil {
		u.t.Fatal(err)
	}
	if err := u.nc.Flush(); err != nil {
		u.t.Fatal(err)
	}
	select {
	case err := <-u.errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") || !strings.Contains(err.Error(), subject) {
			u.t.Errorf("%s, %s on %s: %v, want a permissions violation for it", u.user, what, subject, err)
		}
	case <-time.After(5 * time.Second):
		u.t.Errorf("%s, %s on %s: NATS let it through", u.user, what, subject)
	}
}

// quiet checks that the user met no permission violation.
func (u *rightsUser) quiet() {
	u.t.Helper()
	u.nc.Flush()
	for {
		select {
		case err := <-u.errs:
			u.t.Errorf("%s was refused something its own work needs: %v", u.user, err)
		default:
			return
		}
	}
}

// durableConfig is a durable's configuration as the operator reads it.
func (w *world) durableConfig(name string) jetstream.ConsumerConfig {
	w.t.Helper()
	c, err := w.opJS.Consumer(ctxT(w.t), "TRIBUNAL", name)
	if err != nil {
		w.t.Fatalf("durable %s: %v", name, err)
	}
	info, err := c.Info(ctxT(w.t))
	if err != nil {
		w.t.Fatal(err)
	}
	return info.Config
}

// createRequest is a consumer create request for name that points it at team-a's
// gates.done and lets one message at a time out: the judge's durable for team-b, so
// rewritten, never delivers team-b's work again.
func createRequest(t *testing.T, name string, durable bool) []byte {
	t.Helper()
	cfg := map[string]any{"name": name, "filter_subjects": []string{"tribunal.team-a.gates.done"}, "deliver_policy": "all",
		"ack_policy": "explicit", "max_deliver": -1, "max_ack_pending": 1}
	if durable {
		cfg["durable_name"] = name
	}
	data, err := json.Marshal(map[string]any{"stream_name": "TRIBUNAL", "config": cfg})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestConsoleCannotTouchServiceDurables: the console's user pulls, acks, deletes,
// creates and updates nothing but the stream readers' consumers. Every way to name a
// service's durable is refused by NATS; the one right it has, a reader's name, cannot
// be made to address a durable (the server holds the body's durable name to the
// subject's); the judge's durable is as it was and team-b's batch completes. (Worked on
// de157a3: the console's user held $JS.API.CONSUMER.MSG.NEXT.TRIBUNAL.>,
// $JS.ACK.TRIBUNAL.>, $JS.API.CONSUMER.DELETE.TRIBUNAL.> and
// $JS.API.CONSUMER.CREATE.TRIBUNAL.> for its audits' ordered consumers: a pull on
// tribunal-judge-team-b took team-b's gates.done off the judge's durable and an ack on
// its reply subject settled it, so the judge never judged it and the batch never
// completed; a delete of tribunal-aggregator-team-b stopped every completion of
// team-b's; a create named tribunal-judge-team-b with team-a's filter rewrote the judge's
// durable. The create subject without a name, $JS.API.CONSUMER.CREATE.TRIBUNAL, which an
// ephemeral consumer would use, does the same: nats-server takes the name from the
// request's body there.)
func TestConsoleCannotTouchServiceDurables(t *testing.T) {
	w := newWorld(t, worldOptions{judgeLatency: 300 * time.Millisecond})
	c, sub := w.victim(2)
	w.waitRecorded(sub)
	judge := bus.TenantConsumerName(bus.Judge, "team-b")
	agg := bus.TenantConsumerName(bus.Aggregator, "team-b")
	before := w.durableConfig(judge)

	con := w.rightsUser(tenants.ConsoleUser)
	api := "$JS.API.CONSUMER."
	con.refused("a pull from the judge's durable", api+"MSG.NEXT.TRIBUNAL."+judge, []byte(`{"batch":8,"expires":1000000000}`))
	con.refused("an ack of a message of the judge's durable", "$JS.ACK.TRIBUNAL."+judge+".1.3.1.1764633600000000000.0", nil)
	con.refused("a negative ack", "$JS.ACK.TRIBUNAL."+judge+".1.3.1.1764633600000000000.0", []byte("-NAK"))
	con.refused("a delete of the aggregator's durable", api+"DELETE.TRIBUNAL."+agg, nil)
	con.refused("a delete of the judge's durable", api+"DELETE.TRIBUNAL."+judge, nil)
	con.refused("an update of the judge's durable by name", api+"CREATE.TRIBUNAL."+judge, createRequest(t, judge, true))
	con.refused("an update with the filter in the subject", api+"CREATE.TRIBUNAL."+judge+".tribunal.team-a.gates.done", createRequest(t, judge, true))
	con.refused("an update naming the durable in the body only", api+"CREATE.TRIBUNAL", createRequest(t, judge, false))
	con.refused("an update on the durable endpoint", api+"DURABLE.CREATE.TRIBUNAL."+judge, createRequest(t, judge, true))
	con.refused("the judge's durable's state", api+"INFO.TRIBUNAL."+judge, nil)
	con.refused("the list of consumers", api+"NAMES.TRIBUNAL", nil)

	// A reader's name is the console's: a body naming the judge's durable under it is
	// refused by the server, and a name in the body is overridden by the subject's.
	reader := bus.ReaderName(0)
	resp, err := con.nc.Request(api+"CREATE.TRIBUNAL."+reader, createRequest(t, judge, true), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Data), `"error"`) {
		t.Errorf("a reader's create naming the judge's durable: %s", resp.Data)
	}
	resp, err = con.nc.Request(api+"CREATE.TRIBUNAL."+reader, createRequest(t, judge, false), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(resp.Data, &created); err != nil || created.Name != reader {
		t.Errorf("a reader's create with the judge's name in the body made %q: %s", created.Name, resp.Data)
	}
	if _, err := con.nc.Request(api+"DELETE.TRIBUNAL."+reader, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	con.quiet()

	after := w.durableConfig(judge)
	if strings.Join(after.FilterSubjects, ",") != strings.Join(before.FilterSubjects, ",") || after.MaxAckPending != before.MaxAckPending || after.Durable != judge {
		t.Errorf("the judge's durable changed: %+v, was %+v", after, before)
	}
	w.durableConfig(agg)
	w.victimIntact(c, sub)
}

// TestBlindServicesReadNoStreamMessage: the renderer, the gater and above all the judge
// read no stream message and no job record: not a job.submitted by its sequence or as a
// subject's last (which says which artifact is "ours"), not by a direct get, not the
// stream's per-subject counts. The services' own work needs none of it (the world fails
// on any violation a service meets), and the judge's publisher takes its own duplicates
// on trust (TestJudgeDuplicateNeedsNoRead). (Worked on de157a3 for the stream message:
// every service's user held $JS.API.STREAM.MSG.GET.TRIBUNAL for the publisher's
// duplicate read-back, so as the judge {"last_by_subj":"tribunal.team-b.job.submitted"}
// returned team-b's submission, its spec naming team-b's own artifact; its
// $JS.API.STREAM.INFO.TRIBUNAL with a subjects filter counted a team's events by type.
// Direct gets were refused then too, the stream allowing none and no service holding the
// right: they are tried so that neither a stream that allows them nor a broader grant
// can open the path again.)
func TestBlindServicesReadNoStreamMessage(t *testing.T) {
	w := newWorld(t, worldOptions{judgeLatency: 300 * time.Millisecond})
	c, sub := w.victim(2)
	jobs := w.waitRecorded(sub)
	submitted, _ := events.Subject("team-b", events.TypeJobSubmitted)
	st, err := w.opJS.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetLastMsgForSubject(ctxT(t), submitted)
	if err != nil {
		t.Fatal(err)
	}
	bySeq, _ := json.Marshal(map[string]any{"seq": stored.Sequence})
	bySubject, _ := json.Marshal(map[string]any{"last_by_subj": submitted})
	counts, _ := json.Marshal(map[string]any{"subjects_filter": events.TenantAll("team-b")})
	record := "$KV." + bus.BucketJobs + "." + jobs[0].Key()
	for _, svc := range []string{bus.Judge, bus.Renderer, bus.Gater} {
		u := w.rightsUser(tenants.ServiceUser(svc))
		u.refused("team-b's job.submitted by its sequence", "$JS.API.STREAM.MSG.GET.TRIBUNAL", bySeq)
		u.refused("team-b's last job.submitted", "$JS.API.STREAM.MSG.GET.TRIBUNAL", bySubject)
		u.refused("a direct get of it", "$JS.API.DIRECT.GET.TRIBUNAL", bySeq)
		u.refused("a direct get of the subject's last", "$JS.API.DIRECT.GET.TRIBUNAL."+submitted, nil)
		u.refused("the stream's per-subject counts", "$JS.API.STREAM.INFO.TRIBUNAL", counts)
		u.refused("a stream reader", "$JS.API.CONSUMER.CREATE.TRIBUNAL."+bus.ReaderName(0), nil)
		u.refused("team-b's job record", "$JS.API.DIRECT.GET.KV_"+bus.BucketJobs+"."+record, nil)
		u.refused("team-b's job record by the bucket's stream", "$JS.API.STREAM.MSG.GET.KV_"+bus.BucketJobs, []byte(`{"last_by_subj":"`+record+`"}`))
	}
	w.victimIntact(c, sub)
}

// TestJudgeDuplicateNeedsNoRead: a redelivered gates.done makes the judge publish the
// same verdict again, which the stream acknowledges as a Duplicate; the judge's
// publisher takes that on trust (bus.TrustDuplicatesOf) instead of reading the stored
// verdict back, which its user may not, so the judge meets no permission violation (the
// world fails on one) and the stream keeps one verdict. (On de157a3 the read-back was what the
// judge's STREAM.MSG.GET right was for.)
func TestJudgeDuplicateNeedsNoRead(t *testing.T) {
	w := newWorld(t, worldOptions{})
	c, sub := w.victim(2)
	w.victimIntact(c, sub)
	// The operator stores team-b's gates.done again under a fresh message id: to the
	// judge a redelivery, to the stream a second message.
	subject, _ := events.Subject("team-b", events.TypeGatesDone)
	st, err := w.opJS.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctxT(t), subject)
	if err != nil {
		t.Fatal(err)
	}
	verdicts, _ := events.Subject("team-b", events.TypeVerdictEmitted)
	stored := natstest.SubjectCount(t, w.opJS, verdicts)
	if _, err := w.opJS.Publish(ctxT(t), subject, msg.Data, jetstream.WithMsgID("again-"+msg.Header.Get(jetstream.MsgIDHeader))); err != nil {
		t.Fatal(err)
	}
	// The judge has handled it once its durable holds nothing, acked or not.
	judge := bus.TenantConsumerName(bus.Judge, "team-b")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ci, err := w.opJS.Consumer(ctxT(t), "TRIBUNAL", judge)
		if err != nil {
			t.Fatal(err)
		}
		i, err := ci.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if i.NumPending == 0 && i.NumAckPending == 0 && i.Delivered.Stream > msg.Sequence {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the judge did not handle the gates.done again: %+v", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if now := natstest.SubjectCount(t, w.opJS, verdicts); now != stored {
		t.Errorf("team-b's verdicts: %d, were %d: the judge's second verdict was stored, not a duplicate", now, stored)
	}
	// The batch's results are as they were. (Its audit now names the operator's second
	// gates.done, rightly: an event id stored twice.)
	if res := w.wait(c, sub); res.Summary.Compared != sub.Jobs {
		t.Errorf("team-b's batch after the judge's duplicate: %+v", res.Summary)
	}
}

// TestConsoleAuditsWithItsOwnUser: the console does its work on its own user: its
// batch page and its audit (`tribunal serve console`'s audit: the stream replayed, the
// aggregator's state checked) pass for team-b's batch, a replay for a trust report reads
// every event of it, and it meets no permission violation on the way. Its audits read
// through the stream readers and leave no consumer behind. (On de157a3 it held rights on
// every consumer of the stream for the same audits.)
func TestConsoleAuditsWithItsOwnUser(t *testing.T) {
	w := newWorld(t, worldOptions{})
	c, sub := w.victim(2)
	w.victimIntact(c, sub)

	con := w.rightsUser(tenants.ConsoleUser)
	ctx := ctxT(t)
	b, err := console.WaitForBuckets(ctx, con.js, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	auditBatch := func(ctx context.Context, tenant, batch string) (any, error) {
		rep, err := audit.Run(ctx, con.js, audit.Filter{Tenant: tenant, BatchID: batch}, w.store)
		if err != nil {
			return nil, err
		}
		if err := audit.CheckBatchState(ctx, &rep, records.New(b), tenant, batch); err != nil {
			return nil, err
		}
		return &rep, nil
	}
	const token = "console-operator-token-0123456789"
	srv := httptest.NewServer(console.New(console.Config{Buckets: b, Store: w.store, Pub: bus.NewPublisher(con.js),
		Tenants: map[string]string{token: console.AllTenants}, Audit: auditBatch}))
	defer srv.Close()
	get := func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	get("/api/t/team-b/b/"+sub.BatchID, &page)
	if len(page.Rows) != sub.Jobs {
		t.Errorf("the console's batch page shows %d rows, want %d", len(page.Rows), sub.Jobs)
	}
	var audited struct {
		Verdict string `json:"verdict"`
		Error   string `json:"error"`
	}
	get("/api/t/team-b/b/"+sub.BatchID+"/audit", &audited)
	if audited.Verdict != "passed" {
		t.Errorf("the console's audit of team-b's batch: %+v", audited)
	}
	n := 0
	if err := audit.ReplayOwn(ctx, con.js, audit.Filter{Tenant: "team-b", BatchID: sub.BatchID}, func(r *audit.Recorded) error {
		if r.OK() && r.DeadLetter == "" {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n < 2*sub.Jobs {
		t.Errorf("the console's replay read %d events of a batch of %d jobs", n, sub.Jobs)
	}
	con.quiet()
	st, err := w.opJS.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, "tribunal-reader-") {
			t.Errorf("the console's audits left %s behind", name)
		}
	}
}

// TestConsoleReaderWritesNothing: a reader's consumer is the console's to configure,
// push delivery included, and where JetStream delivers is checked against no one's
// permissions (reply-subject reflection's cousin). So the console points readers at
// team-b's events, one delivering into team-b's job record key, one into an ack subject
// of the judge's durable, and at a message of its own making ({} published as a
// spot-check), delivered to the API subject that purges the jobs bucket. None delivers
// a message: the buckets' streams, the durables' acknowledgements and the JetStream API
// listen inside the server, which JetStream does not count as interest in a push
// consumer's subject, so team-b's record and batch are as they were. (On de157a3 the
// console could create such a consumer under any name; it delivered nothing either.)
func TestConsoleReaderWritesNothing(t *testing.T) {
	w := newWorld(t, worldOptions{judgeLatency: 300 * time.Millisecond})
	con := w.rightsUser(tenants.ConsoleUser)
	own, _ := events.Subject("team-a", events.TypeSpotcheckRecorded)
	if _, err := con.js.Publish(ctxT(t), own, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// The aggregator dead-letters it; team-b's batch comes after, so its audit does not
	// count that undecodable message among its own.
	deadline := time.Now().Add(30 * time.Second)
	for natstest.SubjectCount(t, w.opJS, events.DeadLetterSubject(bus.Aggregator)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the aggregator did not dead-letter the console's {}")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, sub := w.victim(2)
	jobs := w.waitRecorded(sub)
	key := jobs[0].Key()
	judge := bus.TenantConsumerName(bus.Judge, "team-b")
	targets := []struct{ deliver, filter string }{
		{"$KV." + bus.BucketJobs + "." + key, events.TenantAll("team-b")},
		{"$JS.ACK.TRIBUNAL." + judge + ".1.1.1.1764633600000000000.0", events.TenantAll("team-b")},
		{"$JS.API.STREAM.PURGE.KV_" + bus.BucketJobs, own},
	}
	for i, tg := range targets {
		req, _ := json.Marshal(map[string]any{"stream_name": "TRIBUNAL", "config": map[string]any{"name": bus.ReaderName(i),
			"deliver_subject": tg.deliver, "deliver_policy": "all", "ack_policy": "none", "filter_subjects": []string{tg.filter},
			"inactive_threshold": int64(time.Minute)}})
		resp, err := con.nc.Request("$JS.API.CONSUMER.CREATE.TRIBUNAL."+bus.ReaderName(i), req, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(resp.Data), `"error"`) {
			t.Fatalf("a push reader delivering to %s: %s", tg.deliver, resp.Data)
		}
	}
	w.victimIntact(c, sub)
	for i, tg := range targets {
		m, err := w.op.Request("$JS.API.CONSUMER.INFO.TRIBUNAL."+bus.ReaderName(i), nil, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Delivered struct {
				Consumer uint64 `json:"consumer_seq"`
			} `json:"delivered"`
			Pending uint64 `json:"num_pending"`
		}
		if err := json.Unmarshal(m.Data, &info); err != nil || info.Pending == 0 {
			t.Fatalf("reader %d: %v %s", i, err, m.Data)
		}
		if info.Delivered.Consumer > 0 {
			t.Errorf("JetStream delivered %d messages to %s", info.Delivered.Consumer, tg.deliver)
		}
		if _, err := con.nc.Request("$JS.API.CONSUMER.DELETE.TRIBUNAL."+bus.ReaderName(i), nil, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	e, err := w.state.Jobs.Get(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := records.DecodeJob(e.Value()); err != nil {
		t.Errorf("team-b's job record %s: %v", key, err)
	}
	con.quiet()
}
