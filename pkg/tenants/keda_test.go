package tenants_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

type kedaPatch struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Advanced struct {
			ScalingModifiers struct {
				Formula          string `json:"formula"`
				Target           string `json:"target"`
				ActivationTarget string `json:"activationTarget"`
				MetricType       string `json:"metricType"`
			} `json:"scalingModifiers"`
		} `json:"advanced"`
		Triggers []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// jsz is the part of NATS's /jsz?consumers=true that KEDA's nats-jetstream scaler reads:
// per account, per stream, each consumer's backlog.
type jsz struct {
	AccountDetails []struct {
		Name         string `json:"name"`
		StreamDetail []struct {
			Name           string `json:"name"`
			ConsumerDetail []struct {
				Name          string `json:"name"`
				NumPending    uint64 `json:"num_pending"`
				NumAckPending int    `json:"num_ack_pending"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// TestKEDAPatchMatchesTheServer: a NATS server running the generated authorization, with
// the services provisioned for the teams, answers each generated trigger's question (its
// account, stream and consumer on the monitoring endpoint KEDA reads) with that team's
// backlog; and the formula sums every trigger.
func TestKEDAPatchMatchesTheServer(t *testing.T) {
	teams := []string{"team-b", "team-a", "3d-lab"}
	g, err := tenants.Generate(teams, tenants.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	monitor := l.Addr().String()
	l.Close()
	ns := natstest.StartConfig(t, g.Config+fmt.Sprintf("\nhttp: %q\n", monitor))
	var pw string
	for _, c := range g.Credentials {
		if c.User == tenants.ServicesUser {
			pw = c.Password
		}
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(tenants.ServicesUser, pw), nats.CustomInboxPrefix(tenants.InboxPrefix(tenants.ServicesUser)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Config{Tenants: teams, Memory: true}); err != nil {
		t.Fatal(err)
	}
	// Two messages wait for team-a's judges, none for the others.
	subject, _ := events.Subject("team-a", events.TypeGatesDone)
	for i := range 2 {
		if _, err := js.Publish(ctx, subject, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}

	out, err := tenants.KEDAPatch(teams, tenants.KEDAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p kedaPatch
	if err := yaml.UnmarshalStrict([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(p.Spec.Triggers) != len(teams) {
		t.Fatalf("%d triggers for %d teams:\n%s", len(p.Spec.Triggers), len(teams), out)
	}
	var names []string
	var backlog map[string]uint64
	// The monitoring endpoint's consumer figures can trail the publishes by a moment: the
	// triggers are read again until team-a's backlog shows, for up to 10 s.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		names, backlog = readTriggers(t, p, monitor)
		if backlog[tenants.KEDATriggerName("team-a")] == 2 || time.Now().After(deadline) {
			break
		}
	}
	if backlog[tenants.KEDATriggerName("team-a")] != 2 || backlog[tenants.KEDATriggerName("team-b")] != 0 {
		t.Errorf("backlogs %v, want team-a's 2 and team-b's 0", backlog)
	}
	sm := p.Spec.Advanced.ScalingModifiers
	terms := strings.Split(sm.Formula, " + ")
	if sm.Target != "32" || len(terms) != len(names) {
		t.Fatalf("scalingModifiers %+v, want the sum of %v with target 32", sm, names)
	}
	for _, n := range names {
		if !strings.Contains(" "+sm.Formula+" ", " "+n+" ") {
			t.Errorf("formula %q lacks %s", sm.Formula, n)
		}
	}

	if _, err := tenants.KEDAPatch([]string{"team-a", "team_a"}, tenants.KEDAOptions{}); err == nil {
		t.Error("two teams with one trigger name accepted")
	}
}

// readTriggers asks the monitoring endpoint each trigger's question, as KEDA does, and
// returns the trigger names and their backlogs.
func readTriggers(t *testing.T, p kedaPatch, monitor string) (names []string, backlog map[string]uint64) {
	t.Helper()
	backlog = map[string]uint64{}
	for _, tr := range p.Spec.Triggers {
		md := tr.Metadata
		if tr.Type != "nats-jetstream" || md["natsServerMonitoringEndpoint"] != "nats.tribunal.svc.cluster.local:8222" || md["lagThreshold"] != "32" {
			t.Errorf("trigger %+v", tr)
		}
		names = append(names, tr.Name)
		resp, err := http.Get("http://" + monitor + "/jsz?acc=" + md["account"] + "&consumers=true")
		if err != nil {
			t.Fatal(err)
		}
		var z jsz
		err = json.NewDecoder(resp.Body).Decode(&z)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range z.AccountDetails {
			for _, s := range a.StreamDetail {
				for _, c := range s.ConsumerDetail {
					if a.Name == md["account"] && s.Name == md["stream"] && c.Name == md["consumer"] {
						found = true
						backlog[tr.Name] = c.NumPending + uint64(c.NumAckPending)
					}
				}
			}
		}
		if !found {
			t.Errorf("trigger %s: no consumer %s of stream %s in account %s on the server", tr.Name, md["consumer"], md["stream"], md["account"])
		}
	}
	return names, backlog
}
