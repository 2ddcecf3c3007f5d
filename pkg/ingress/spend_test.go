package ingress_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// TestIngressRefusesWhatATeamMayNotSpend: through the real ingress in front of the real
// services, a team's batch naming a model the deployment does not allow, or an allowed
// panel beyond the cap, is refused with the model's name or the cap, and the provider is
// asked nothing. The team's client learns its allowance from the ingress and refuses
// before publishing anything; a client that skips that check is refused by the ingress
// itself, and the refusal is counted. Only the ingress holds the rules here: the
// services run without any.
func TestIngressRefusesWhatATeamMayNotSpend(t *testing.T) {
	m := telemetry.Reset()
	env := e2e.NewEnv(t)
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	r := env.Start(p, "test")
	js, err := jetstream.New(env.Conn())
	if err != nil {
		t.Fatal(err)
	}
	policy := spend.Policy{Models: []string{"gpt-4o"}, Tenants: map[string][]string{"team-b": {"o1-pro"}}, Default: p.DefaultModel()}
	srv := httptest.NewServer(ingress.New(ingress.Config{Tokens: map[string]string{tokA: "team-a", tokB: "team-b"},
		Pub: bus.NewPublisher(js), Store: env.Store, Buckets: r.Buckets, Spend: policy}))
	t.Cleanup(srv.Close)
	f := &fixture{env: env, running: r, js: js, url: srv.URL}
	a := dial(t, f, tokA)

	// The ingress tells each team its own allowance.
	if got, want := *a.SpendAllowance(), (spend.Allowance{Models: []string{"fixed-A", "gpt-4o"}, Default: "fixed-A", MaxCallsPerAC: 16}); !reflect.DeepEqual(got, want) {
		t.Errorf("team-a's allowance %+v, want %+v", got, want)
	}
	if got := dial(t, f, tokB).SpendAllowance(); !got.Allows("o1-pro") || got.Allows("gpt-4o") {
		t.Errorf("team-b's allowance %+v", got)
	}

	unlisted := e2e.WriteBatch(t, e2e.TextBatch(2, "judges: [gpt-4o, o1-pro]\n"))
	wide := e2e.WriteBatch(t, e2e.TextBatch(1, "positions: swap\njudges: [gpt-4o, gpt-4o, gpt-4o, gpt-4o, gpt-4o]\n"))
	capMsg := "AC-1 would make up to 20 judge calls (5 models × 2 orders × 2 with the repair re-ask); this deployment allows 16 per AC (--max-calls-per-ac)"

	// The team's own client: refused whole, nothing published.
	honest := &client.Submitter{Pub: a, Store: a}
	for _, c := range []struct {
		b    *batch.Batch
		want string
	}{{unlisted, `judges[1]: model "o1-pro" is not allowed on this deployment (allowed: fixed-A (the default), gpt-4o)`}, {wide, capMsg}} {
		_, err := honest.Submit(ctxT(t), c.b, a.Tenant(), client.NewBatchID(c.b))
		var re *client.RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v; want a refusal saying %s", c.b.Path, err, c.want)
		}
	}
	if n := streamCount(t, js); n != 0 {
		t.Fatalf("refused batches published %d events", n)
	}

	// A client that skips the check: the ingress refuses every job, names the AC, the
	// field and the model (or the cap), and counts it.
	skipping := &client.Submitter{Pub: a, Store: a, Spend: &spend.Allowance{AnyModel: true}}
	for _, c := range []struct {
		b                   *batch.Batch
		field, reason, says string
	}{
		{unlisted, "spec.ab.judges[1]", spend.ReasonModel, `model "o1-pro" is not allowed on this deployment`},
		{wide, "spec.ab.judges", spend.ReasonCalls, capMsg},
	} {
		before := m.Value("tribunal_refusals_total", "service=ingress", "reason="+c.reason)
		_, err := skipping.Submit(ctxT(t), c.b, a.Tenant(), client.NewBatchID(c.b))
		var ie *ingress.Error
		if !errors.As(err, &ie) || ie.Status != http.StatusForbidden || len(ie.Problem.Refusals) == 0 {
			t.Fatalf("%s: %v; want the ingress's refusal", c.b.Path, err)
		}
		ref := ie.Problem.Refusals[0]
		if ref.Reason != c.reason || ref.Field != c.field || ref.AC != "AC-1" || !strings.Contains(ref.Message, c.says) {
			t.Errorf("refusal %+v; want %s at %s saying %s", ref, c.reason, c.field, c.says)
		}
		if got := m.Value("tribunal_refusals_total", "service=ingress", "reason="+c.reason); got < before+1 {
			t.Errorf("%s refusals counted %v, want at least %v", c.reason, got, before+1)
		}
	}
	if p.Calls() != 0 {
		t.Fatalf("refused batches made %d provider calls", p.Calls())
	}

	// What the team may spend goes through, and is judged by the model it named.
	allowed := e2e.WriteBatch(t, e2e.TextBatch(2, "judges: [gpt-4o]\n"))
	sub, err := honest.Submit(ctxT(t), allowed, a.Tenant(), client.NewBatchID(allowed))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return a.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Results(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Compared != 2 || !strings.Contains(res.Rows[0].Judge, "gpt-4o") || p.Calls() != 2 {
		t.Fatalf("allowed batch: %+v, rows %+v, %d calls", res.Summary, res.Rows, p.Calls())
	}
}
