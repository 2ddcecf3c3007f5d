package renderer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

var quiet = slog.New(slog.DiscardHandler)

// requested is the render request the aggregator publishes for a submission.
func requested(t *testing.T, env *handlertest.Env, ac string) events.Event {
	t.Helper()
	for _, s := range env.Submitted(t, handlertest.Quickstart(), "team-a", "b1") {
		if s.JobID == ac {
			return events.New(&events.RenderRequested{Spec: s.Payload.(*events.JobSubmitted).Spec}, s.Tenant, s.BatchID, s.JobID, 0, "", &s.Envelope)
		}
	}
	t.Fatalf("no %s in the quickstart", ac)
	return events.Event{}
}

func render(t *testing.T, env *handlertest.Env, renv stage.RenderEnv, ev events.Event) (*events.RenderDone, events.Event) {
	t.Helper()
	renv.Log = quiet
	out, err := handlertest.Deliver(context.Background(), renderer.New(env.Store, artifact.FetchOptions{}, renv).Handle, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Type != events.TypeRenderDone {
		t.Fatalf("published %v, want one render.done", out)
	}
	if out[0].CausationID != ev.ID || out[0].JobID != ev.JobID || out[0].Tenant != ev.Tenant {
		t.Fatalf("render.done does not follow its request: %+v", out[0].Envelope)
	}
	return out[0].Payload.(*events.RenderDone), out[0]
}

func TestRendersStoredArtifacts(t *testing.T) {
	env := handlertest.New(t)
	rd, _ := render(t, env, stage.RenderEnv{}, requested(t, env, "AC-1"))
	if rd.Blocked != "" || len(rd.Artifacts) != 2 {
		t.Fatalf("blocked %q, %d artifacts", rd.Blocked, len(rd.Artifacts))
	}
	for role, a := range rd.Artifacts {
		if _, err := env.Store.Stat(context.Background(), blob.Ref{Tenant: "team-a", SHA256: a.Blob.SHA256}); err != nil {
			t.Fatalf("%s artifact %s not in the store: %v", role, a.Blob.SHA256, err)
		}
	}
}

// A problem found when the AC was planned is the job's reason as it is.
func TestPlannedProblemBlocks(t *testing.T) {
	env := handlertest.New(t)
	ev := requested(t, env, "AC-1")
	ev.Payload.(*events.RenderRequested).Spec.Problem = "AC-1: line 10: ours: no such file"
	if rd, _ := render(t, env, stage.RenderEnv{}, ev); rd.Blocked != "AC-1: line 10: ours: no such file" {
		t.Fatalf("blocked %q", rd.Blocked)
	}
}

// Equivalence runs its documents through the provider; a renderer without one blocks
// the job with that reason instead of failing it over and over.
func TestEquivalenceWithoutProviderBlocks(t *testing.T) {
	env := handlertest.New(t)
	rd, _ := render(t, env, stage.RenderEnv{}, requested(t, env, "AC-12"))
	if rd.Blocked == "" {
		t.Fatal("equivalence rendered without a provider")
	}
	rd, _ = render(t, env, stage.RenderEnv{Provider: handlertest.QuickstartProvider(t), Cache: env.Buckets.Cache}, requested(t, env, "AC-12"))
	if rd.Blocked != "" || len(rd.Transcripts) == 0 {
		t.Fatalf("with a provider: blocked %q, %d transcripts", rd.Blocked, len(rd.Transcripts))
	}
}

func TestWrongEventIsPermanent(t *testing.T) {
	env := handlertest.New(t)
	sub := handlertest.Of(env.Submitted(t, handlertest.Quickstart(), "team-a", "b1"), events.TypeJobSubmitted)[0]
	_, err := handlertest.Deliver(context.Background(), renderer.New(env.Store, artifact.FetchOptions{}, stage.RenderEnv{Log: quiet}).Handle, sub)
	if !bus.IsPermanent(err) || !strings.Contains(err.Error(), "job.submitted") {
		t.Fatalf("want a permanent error naming the event, got %v", err)
	}
}

// TestSpendBlocksBeforeAnyWork: an equivalence job naming a runner model its tenant may
// not name, which the renderer itself would ask, is blocked with the model and the field
// before a document is run; so is a judge panel the judge service would refuse. The
// refusals are counted; the default model runs.
func TestSpendBlocksBeforeAnyWork(t *testing.T) {
	m := telemetry.Reset()
	env := handlertest.New(t)
	p := handlertest.QuickstartProvider(t)
	h := renderer.New(env.Store, artifact.FetchOptions{}, stage.RenderEnv{Provider: p, Cache: env.Buckets.Cache, Log: quiet},
		renderer.WithSpend(spend.Policy{Models: []string{"gpt-4o"}})).Handle
	with := func(ac string, change func(*events.JobSpec)) events.Event {
		ev := requested(t, env, ac)
		req := *ev.Payload.(*events.RenderRequested)
		change(&req.Spec)
		ev.Payload = &req
		return ev
	}
	runner := with("AC-12", func(s *events.JobSpec) {
		eq := *equivalence.SpecOf(s.KindPart)
		eq.RunnerModel = "o1-pro"
		s.KindPart = &eq
	})
	panel := with("AC-1", func(s *events.JobSpec) {
		ab := *ab.SpecOf(s.KindPart)
		ab.Judges = []string{"gpt-4o", "ft:gpt-4o:acme::x"}
		s.KindPart = &ab
	})
	for ev, want := range map[*events.Event]string{
		&runner: `not judged: equivalence.runner_model: model "o1-pro" is not allowed on this deployment (allowed: fixed-A+recorded-answers.json (the default), gpt-4o)`,
		&panel:  `not judged: ab.judges[1]: model "ft:gpt-4o:acme::x" is not allowed`,
	} {
		out, err := handlertest.Deliver(context.Background(), h, *ev)
		if err != nil || len(out) != 1 {
			t.Fatalf("%s: %v, %d events", ev.JobID, err, len(out))
		}
		if rd := out[0].Payload.(*events.RenderDone); !strings.HasPrefix(rd.Blocked, want) {
			t.Errorf("%s blocked %q, want %q", ev.JobID, rd.Blocked, want)
		}
	}
	if p.Calls() != 0 {
		t.Fatalf("the runner asked the provider %d times", p.Calls())
	}
	if got := m.Value("tribunal_refusals_total", "service=renderer", "reason="+spend.ReasonModel); got != 2 {
		t.Errorf("refusals counted %v, want 2", got)
	}
	out, err := handlertest.Deliver(context.Background(), h, requested(t, env, "AC-12"))
	if err != nil || out[0].Payload.(*events.RenderDone).Blocked != "" || p.Calls() == 0 {
		t.Fatalf("the default runner model: %v, %+v, %d calls", err, out, p.Calls())
	}
}
