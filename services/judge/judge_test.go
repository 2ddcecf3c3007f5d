package judge_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/critic"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/services/gater"
	judgesvc "github.com/tribunal-dev/tribunal/services/judge"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

var quiet = slog.New(slog.DiscardHandler)

// gated is the quickstart AC's gates.done, as the gater publishes it.
func gated(t *testing.T, env *handlertest.Env, ac string) events.Event {
	t.Helper()
	hs := map[events.Type]bus.Handler{
		events.TypeRenderRequested: renderer.New(env.Store, artifact.FetchOptions{}, stage.RenderEnv{Log: quiet,
			Provider: handlertest.QuickstartProvider(t), Cache: env.Buckets.Cache}).Handle,
		events.TypeRenderDone: gater.New(stage.GateEnv{Store: env.Store, Views: env.Buckets.Views, Log: quiet}).Handle,
	}
	for _, s := range env.Submitted(t, handlertest.Quickstart(), "team-a", "b1") {
		if s.JobID == ac {
			req := events.New(&events.RenderRequested{Spec: s.Payload.(*events.JobSubmitted).Spec}, s.Tenant, s.BatchID, s.JobID, 0, "", &s.Envelope)
			if gd := handlertest.Of(handlertest.Drive(t, hs, req), events.TypeGatesDone); len(gd) == 1 {
				return gd[0]
			}
			t.Fatalf("%s did not pass its gates", ac)
		}
	}
	t.Fatalf("no %s in the quickstart", ac)
	return events.Event{}
}

func judgeWith(env *handlertest.Env, p pj.Provider) bus.Handler {
	return judgesvc.New(stage.JudgeEnv{Store: env.Store, Provider: p, Cache: env.Buckets.Cache, Instance: "j1", Log: quiet}).Handle
}

// Every kind's verdict names the judge that produced it.
func TestVerdictNamesItsJudge(t *testing.T) {
	env := handlertest.New(t)
	for _, ac := range []string{"AC-1", "AC-11", "AC-12"} {
		gd := gated(t, env, ac)
		out, err := handlertest.Deliver(context.Background(), judgeWith(env, handlertest.QuickstartProvider(t)), gd)
		if err != nil {
			t.Fatalf("%s: %v", ac, err)
		}
		if len(out) != 1 || out[0].CausationID != gd.ID {
			t.Fatalf("%s: published %v", ac, out)
		}
		v := out[0].Payload.(*events.VerdictEmitted)
		var judges []events.JudgeInfo
		for _, vote := range v.Votes {
			judges = append(judges, vote.Judge)
		}
		if critic.VoteOf(v.KindPart) != nil {
			judges = append(judges, critic.VoteOf(v.KindPart).Judge)
		}
		for _, c := range v.Cases {
			judges = append(judges, c.Judge)
		}
		if len(judges) == 0 {
			t.Fatalf("%s: a verdict without a judge: %+v", ac, v)
		}
		for _, j := range judges {
			if j.Provider != "scripted" || j.Instance != "j1" || j.PromptHash == "" {
				t.Errorf("%s: judge %+v", ac, j)
			}
		}
	}
}

// The judge-call cache answers a repeated call, so a redelivered job costs no model call;
// the cached answer says so.
func TestRepeatedCallIsCached(t *testing.T) {
	env := handlertest.New(t)
	gd := gated(t, env, "AC-1")
	p := handlertest.QuickstartProvider(t)
	h := judgeWith(env, p)
	if _, err := handlertest.Deliver(context.Background(), h, gd); err != nil {
		t.Fatal(err)
	}
	calls := p.Calls()
	out, err := handlertest.Deliver(context.Background(), h, gd)
	if err != nil {
		t.Fatal(err)
	}
	if p.Calls() != calls {
		t.Fatalf("the repeated job asked the provider again (%d calls, then %d)", calls, p.Calls())
	}
	for _, vote := range out[0].Payload.(*events.VerdictEmitted).Votes {
		if !vote.Judge.Cached || vote.Judge.Provider != "scripted" {
			t.Fatalf("vote %+v, want the cached scripted answer", vote.Judge)
		}
	}
}

// A provider that stays unreachable after its own retries ends the call: the verdict
// records each vote as unavailable with the cause, and the aggregator blocks the job with
// it (redrivable), instead of the event cycling forever.
func TestUnavailableProviderEndsAsUnavailableVotes(t *testing.T) {
	env := handlertest.New(t)
	gd := gated(t, env, "AC-1")
	down := judgetest.FuncProvider(func(context.Context, pj.Request) (pj.Response, error) {
		return pj.Response{}, fmt.Errorf("%w: connection refused", pj.ErrUnavailable)
	})
	out, err := handlertest.Deliver(context.Background(), judgeWith(env, down), gd)
	if err != nil {
		t.Fatal(err)
	}
	votes := out[0].Payload.(*events.VerdictEmitted).Votes
	if len(votes) == 0 {
		t.Fatal("no votes")
	}
	for _, v := range votes {
		if v.Status != events.VoteUnavailable || !strings.Contains(v.Error, "connection refused") {
			t.Fatalf("vote %s: %q", v.Status, v.Error)
		}
	}
}

func TestWrongEventIsPermanent(t *testing.T) {
	env := handlertest.New(t)
	sub := handlertest.Of(env.Submitted(t, handlertest.Quickstart(), "team-a", "b1"), events.TypeJobSubmitted)[0]
	if _, err := handlertest.Deliver(context.Background(), judgeWith(env, handlertest.QuickstartProvider(t)), sub); !bus.IsPermanent(err) {
		t.Fatalf("want a permanent error, got %v", err)
	}
}

// TestSpendRefusedBeforeTheProvider: a gated job naming a model its tenant may not name,
// or a panel beyond the cap, reaches the judge past every entry (an operator's direct
// submission, an event from before the rules, a rejudge): the judge asks the provider
// nothing, counts the refusal and gives the job up with the reason (a permanent error:
// its dead letter blocks the job), whatever the kind.
func TestSpendRefusedBeforeTheProvider(t *testing.T) {
	m := telemetry.Reset()
	env := handlertest.New(t)
	p := handlertest.QuickstartProvider(t)
	policy := spend.Policy{Models: []string{"gpt-4o"}, Tenants: map[string][]string{"team-b": {"o1-pro"}}}
	h := judgesvc.New(stage.JudgeEnv{Store: env.Store, Provider: p, Cache: env.Buckets.Cache, Instance: "j1", Log: quiet}, judgesvc.WithSpend(policy)).Handle
	panel := func(ev events.Event, positions string, judges ...string) events.Event {
		gd := *ev.Payload.(*events.GatesDone)
		gd.Judges, gd.Positions = judges, positions
		ev.Payload = &gd
		return ev
	}
	ab, critic := gated(t, env, "AC-1"), gated(t, env, "AC-11")
	cases := []struct {
		name   string
		ev     events.Event
		reason string
		says   string
	}{
		{"an unlisted model in a panel", panel(ab, "single", "gpt-4o", "o1-pro"), spend.ReasonModel, `judges[1]: model "o1-pro" is not allowed on this deployment (allowed: fixed-A+recorded-answers.json (the default), gpt-4o)`},
		{"another team's model", panel(critic, "", "o1-pro"), spend.ReasonModel, `judges[0]: model "o1-pro" is not allowed`},
		{"an allowed panel beyond the cap", panel(ab, "swap", "gpt-4o", "gpt-4o", "gpt-4o", "gpt-4o", "gpt-4o"), spend.ReasonCalls, "AC-1 would make up to 20 judge calls (5 models × 2 orders × 2 with the repair re-ask); this deployment allows 16 per AC (--max-calls-per-ac)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := m.Value("tribunal_refusals_total", "service=judge", "reason="+c.reason)
			out, err := handlertest.Deliver(context.Background(), h, c.ev)
			if !bus.IsPermanent(err) || !strings.Contains(err.Error(), c.says) || len(out) != 0 {
				t.Fatalf("published %d, err %v; want a permanent error saying %s", len(out), err, c.says)
			}
			if got := m.Value("tribunal_refusals_total", "service=judge", "reason="+c.reason); got != before+1 {
				t.Errorf("refusals counted %v, want %v", got, before+1)
			}
		})
	}
	if p.Calls() != 0 {
		t.Fatalf("the provider was asked %d times", p.Calls())
	}
	// The default model, by omission, and a listed one are judged.
	for _, ev := range []events.Event{ab, panel(ab, "swap", "gpt-4o")} {
		if _, err := handlertest.Deliver(context.Background(), h, ev); err != nil {
			t.Fatal(err)
		}
	}
	if p.Calls() != 3 {
		t.Fatalf("the allowed jobs made %d calls, want 1 + 2", p.Calls())
	}
}
