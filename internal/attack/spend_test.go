package attack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// reviewModels are the 64 model names of the outside review's batch (issue 23): the
// deployment's own model among a team's picks, the dearest ones, a fine-tuned model id
// and made-up names.
func reviewModels(own string) []string {
	models := []string{own, "o1-pro", "gpt-4.5-preview", "ft:gpt-4o-2024-08-06:acme:judge:9xQ2kT1b", "o1", "o3", "gpt-4o", "gpt-4-turbo"}
	for i := len(models); i < 64; i++ {
		models = append(models, fmt.Sprintf("team-a-pick-%02d", i))
	}
	return models
}

// reviewBatch is the review's batch: one ab AC judged in both orders by a panel of the
// given models.
func reviewBatch(models []string) map[string]string {
	files := textBatch(1, "spender")
	files["batch.yaml"] = strings.Replace(files["batch.yaml"], "acs:\n",
		"positions: swap\njudges: ["+strings.Join(models, ", ")+"]\nacs:\n", 1)
	return files
}

// modelCounter counts the provider's calls by the model they ask.
type modelCounter struct {
	judge.Provider
	mu     sync.Mutex
	models map[string]int
}

func (m *modelCounter) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	m.mu.Lock()
	m.models[req.Model]++
	m.mu.Unlock()
	return m.Provider.Complete(ctx, req)
}

func (m *modelCounter) calls() (calls int, models int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.models {
		calls += n
	}
	return calls, len(m.models)
}

// TestTeamChoosesWhatItSpends is the outside review of issue 23 ("The operator decides
// what a team may spend"): team-a submits one AC with positions: swap and 64 model names
// of its choosing. On de157a3, the commit before this work, the ingress published it and
// the judge asked the provider for every model in both orders: 128 provider requests
// across the 64 names (129 across 65 with the deployment's own default model in the
// review's run), o1-pro, gpt-4.5-preview and a fine-tuned model id among them, at the
// deployment's expense. Now the ingress refuses it with each model's name (and the team's
// own client refuses it before publishing anything), the same panel of allowed names is
// refused with the cap on calls per AC, and the judge service refuses what reaches it
// past the ingress: 0 provider calls for team-a, and team-b's batch completes with a
// clean audit.
func TestTeamChoosesWhatItSpends(t *testing.T) {
	m := telemetry.Reset()
	var counter *modelCounter
	var own string
	w := newWorld(t, worldOptions{
		service: func(svc string, o *app.Options) {
			if svc != bus.Judge {
				return
			}
			// The deployment allows only its own model; the judge checks again what
			// reaches it, with the provider's default as the default.
			own = o.Provider.DefaultModel()
			counter = &modelCounter{Provider: o.Provider, models: map[string]int{}}
			o.Provider, o.Spend = counter, &spend.Policy{}
		},
		ingress: func(c *ingress.Config) { c.Spend = spend.Policy{Default: own} },
	})
	bc, victim := w.victim(3)
	a := w.team("team-a")
	models := reviewModels(own)
	spender := e2e.WriteBatch(t, reviewBatch(models))

	// The team's own client learns its allowance from the ingress: refused, nothing sent.
	_, err := (&client.Submitter{Pub: a, Store: a}).Submit(ctxT(t), spender, a.Tenant(), client.NewBatchID(spender))
	var re *client.RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `judges[1]: model "o1-pro" is not allowed on this deployment (allowed: `+own+` (the default))`) ||
		!strings.Contains(err.Error(), `judges[3]: model "ft:gpt-4o-2024-08-06:acme:judge:9xQ2kT1b" is not allowed`) {
		t.Fatalf("the team's client: %v", err)
	}

	// A client that skips the check, as the review's did: the ingress refuses the job,
	// naming the field and the model, and counts it.
	skip := &client.Submitter{Pub: a, Store: a, Spend: &spend.Allowance{AnyModel: true}}
	_, err = skip.Submit(ctxT(t), spender, a.Tenant(), client.NewBatchID(spender))
	var ie *ingress.Error
	if !errors.As(err, &ie) || ie.Status != http.StatusForbidden || len(ie.Problem.Refusals) != 1 {
		t.Fatalf("a client skipping the check: %v", err)
	}
	if r := ie.Problem.Refusals[0]; r.Reason != spend.ReasonModel || r.AC != "AC-1" || r.Field != "spec.ab.judges[1]" || !strings.Contains(r.Message, `model "o1-pro" is not allowed`) {
		t.Errorf("refusal %+v", r)
	}

	// Allowed names only, 64 of them: refused with the cap, whoever checks.
	wide := e2e.WriteBatch(t, reviewBatch(slices.Repeat([]string{own}, 64)))
	capMsg := "AC-1 would make up to 256 judge calls (64 models × 2 orders × 2 with the repair re-ask); this deployment allows 16 per AC (--max-calls-per-ac)"
	if _, err := (&client.Submitter{Pub: a, Store: a}).Submit(ctxT(t), wide, a.Tenant(), client.NewBatchID(wide)); !errors.As(err, &re) || !strings.Contains(err.Error(), capMsg) {
		t.Errorf("an allowed panel over the cap, the team's client: %v", err)
	}
	if _, err := skip.Submit(ctxT(t), wide, a.Tenant(), client.NewBatchID(wide)); !errors.As(err, &ie) || ie.Problem.Refusals[0].Reason != spend.ReasonCalls || !strings.Contains(ie.Problem.Refusals[0].Message, capMsg) {
		t.Errorf("an allowed panel over the cap, the ingress: %v", err)
	}

	// The same batch published past the ingress (on its own connection: what a
	// compromised ingress, an operator's direct submission or an old event can do):
	// the judge service asks the provider nothing and the AC ends blocked with why.
	ijs, _ := jetstream.New(w.ingressNC)
	past := &client.Submitter{Pub: bus.NewPublisher(ijs), Store: a, Spend: &spend.Allowance{AnyModel: true}}
	sub, err := past.Submit(ctxT(t), spender, a.Tenant(), client.NewBatchID(spender))
	if err != nil {
		t.Fatal(err)
	}
	res := w.wait(a, sub)
	if len(res.Rows) != 1 || res.Rows[0].Status != string(events.StatusBlocked) || !strings.Contains(res.Rows[0].Reason, `judges[1]: model "o1-pro" is not allowed on this deployment`) {
		t.Errorf("past the ingress: %+v", res.Rows)
	}

	w.victimIntact(bc, victim)
	calls, names := counter.calls()
	if calls != victim.Jobs || names != 1 {
		t.Errorf("the provider was asked %d times about %d models (%v); want only the victim's %d calls of the deployment's model", calls, names, counter.models, victim.Jobs)
	}
	for svc, want := range map[string]float64{"ingress": 1, "judge": 1} {
		if got := m.Value("tribunal_refusals_total", "service="+svc, "reason="+spend.ReasonModel); got != want {
			t.Errorf("%s refusals of models: %v, want %v", svc, got, want)
		}
	}
	if got := m.Value("tribunal_refusals_total", "service=ingress", "reason="+spend.ReasonCalls); got != 1 {
		t.Errorf("ingress refusals of calls: %v, want 1", got)
	}
}
