package tenants_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// TestIsolation starts a real nats-server with the generated authorization and checks
// what each user can and cannot do.
func TestIsolation(t *testing.T) {
	g, err := tenants.Generate([]string{"team-a", "team-b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "auth.conf")
	if err := os.WriteFile(conf, []byte(g.Config), 0o600); err != nil {
		t.Fatal(err)
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: filepath.Join(dir, "js"), Listen: "127.0.0.1:0", ConfigFile: conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	pw := map[string]string{}
	for _, c := range g.Credentials {
		pw[c.User] = c.Password
	}
	type conn struct {
		nc   *nats.Conn
		errs chan error
	}
	connect := func(user string) conn {
		errs := make(chan error, 16)
		opts := []nats.Option{nats.UserInfo(user, pw[user]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })}
		if user != tenants.ServicesUser {
			opts = append(opts, nats.CustomInboxPrefix(tenants.InboxPrefix(user)))
		}
		nc, err := nats.Connect(ns.ClientURL(), opts...)
		if err != nil {
			t.Fatalf("connect %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return conn{nc, errs}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	svc := connect(tenants.ServicesUser)
	sjs, _ := jetstream.New(svc.nc)
	if err := bus.Provision(ctx, sjs, bus.Config{}); err != nil {
		t.Fatalf("services user cannot provision: %v", err)
	}

	a := connect("team-a")
	expectViolation := func(what string) {
		t.Helper()
		select {
		case err := <-a.errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Fatalf("%s: got %v, want a permissions violation", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no permissions violation reported", what)
		}
	}

	// Team A publishes into its own ingress, acknowledged by the stream.
	ajs, _ := jetstream.New(a.nc)
	own, _ := events.Subject("team-a", events.TypeRenderRequested)
	if _, err := ajs.Publish(ctx, own, []byte("x")); err != nil {
		t.Fatalf("team-a publishing its own ingress: %v", err)
	}
	// ... but not into team B's subjects.
	other, _ := events.Subject("team-b", events.TypeRenderRequested)
	if err := a.nc.Publish(other, []byte("x")); err != nil {
		t.Fatal(err)
	}
	a.nc.Flush()
	expectViolation("publish into team-b")
	// ... nor read them.
	if _, err := a.nc.SubscribeSync(events.TenantAll("team-b")); err != nil {
		t.Fatal(err)
	}
	a.nc.Flush()
	expectViolation("subscribe to team-b")
	// ... nor reach the JetStream API (which would let it read the whole stream).
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	defer acancel()
	if _, err := ajs.Stream(actx, "TRIBUNAL"); err == nil {
		t.Fatal("team-a reached the JetStream API")
	}
	expectViolation("call the JetStream API")
	// ... nor publish results as if it were a service.
	forged, _ := events.Subject("team-a", events.TypeVerdictEmitted)
	if err := a.nc.Publish(forged, []byte("x")); err != nil {
		t.Fatal(err)
	}
	a.nc.Flush()
	expectViolation("publish a verdict")

	// Team A reads its own subjects.
	sub, err := a.nc.SubscribeSync(events.TenantAll("team-a"))
	if err != nil {
		t.Fatal(err)
	}
	a.nc.Flush()
	done, _ := events.Subject("team-a", events.TypeBatchCompleted)
	if err := svc.nc.Publish(done, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("team-a reading its own results: %v", err)
	}
	select {
	case err := <-a.errs:
		t.Fatalf("unexpected error: %v", err)
	default:
	}
	// The stream stored only what team A was allowed to publish.
	st, err := sjs.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, other); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("team-b's subject holds a message: %v", err)
	}
}

func TestGenerateRejectsBadTeams(t *testing.T) {
	for _, teams := range [][]string{{"a.b"}, {"x", "x"}, {tenants.ServicesUser}, {"*"}} {
		if _, err := tenants.Generate(teams, nil); err == nil {
			t.Errorf("%v accepted", teams)
		}
	}
	g, err := tenants.Generate([]string{"t1"}, map[string]string{"t1": "kept"})
	if err != nil || g.Credentials[1].Password != "kept" || strings.Contains(g.Config, "kept") {
		t.Fatalf("existing password not kept or leaked: %v %+v", err, g.Credentials)
	}
}
