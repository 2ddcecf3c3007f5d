package tenants_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// TestEnvConfig: the authorization with passwords referring to the server's environment
// holds no secret, and a real nats-server started with it and the variables set admits
// each user with its own password only, under the same least rights as Generate's: a
// service provisions its part, the renderer may not publish a verdict.
func TestEnvConfig(t *testing.T) {
	users := []string{tenants.OperatorUser, tenants.ServiceUser(bus.Renderer), tenants.ServiceUser(bus.Judge)}
	conf, err := tenants.EnvConfig(users, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(conf, "$2a$") || strings.Count(conf, "password: $TRIBUNAL_NATS_") != len(users) {
		t.Fatalf("config holds hashes or misses references:\n%s", conf)
	}
	if got := tenants.PasswordEnv("tribunal-renderer"); got != "TRIBUNAL_NATS_RENDERER_PASSWORD" {
		t.Errorf("PasswordEnv = %q", got)
	}
	if _, err := tenants.EnvConfig([]string{"someone"}, ""); err == nil {
		t.Error("a user not generated was accepted")
	}
	pw := map[string]string{}
	for _, u := range users {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		pw[u] = hex.EncodeToString(b)
		t.Setenv(tenants.PasswordEnv(u), pw[u])
	}
	ns := natstest.StartConfig(t, conf)
	errs := make(chan error, 16)
	connect := func(user, password string) (*nats.Conn, error) {
		return nats.Connect(ns.ClientURL(), nats.UserInfo(user, password), nats.CustomInboxPrefix(tenants.InboxPrefix(user)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	}
	renderer := tenants.ServiceUser(bus.Renderer)
	if nc, err := connect(renderer, pw[tenants.OperatorUser]); err == nil {
		nc.Close()
		t.Fatal("the renderer was admitted with the operator's password")
	}
	nc, err := connect(renderer, pw[renderer])
	if err != nil {
		t.Fatalf("the renderer with its own password: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Config{Services: []string{bus.Renderer}}); err != nil {
		t.Fatalf("the renderer cannot provision its part: %v", err)
	}
	if err := nc.Publish("tribunal.default.verdict.emitted", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("the renderer publishing a verdict: %v, want a permissions violation", err)
		}
	case <-ctx.Done():
		t.Error("the renderer published a verdict unrefused")
	}
}
