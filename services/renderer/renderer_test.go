package renderer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingest"
	"github.com/tribunal-dev/tribunal/pkg/kind"
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

func render(t *testing.T, env *handlertest.Env, renv kind.RenderEnv, ev events.Event) (*events.RenderDone, events.Event) {
	t.Helper()
	renv.Log = quiet
	out, err := handlertest.Deliver(context.Background(), renderer.New(env.Store, ingest.FetchOptions{}, renv).Handle, ev)
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
	rd, _ := render(t, env, kind.RenderEnv{}, requested(t, env, "AC-1"))
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
	if rd, _ := render(t, env, kind.RenderEnv{}, ev); rd.Blocked != "AC-1: line 10: ours: no such file" {
		t.Fatalf("blocked %q", rd.Blocked)
	}
}

// Equivalence runs its documents through the provider; a renderer without one blocks
// the job with that reason instead of failing it over and over.
func TestEquivalenceWithoutProviderBlocks(t *testing.T) {
	env := handlertest.New(t)
	rd, _ := render(t, env, kind.RenderEnv{}, requested(t, env, "AC-12"))
	if rd.Blocked == "" {
		t.Fatal("equivalence rendered without a provider")
	}
	rd, _ = render(t, env, kind.RenderEnv{Provider: handlertest.QuickstartProvider(t), Cache: env.Buckets.Cache}, requested(t, env, "AC-12"))
	if rd.Blocked != "" || len(rd.Transcripts) == 0 {
		t.Fatalf("with a provider: blocked %q, %d transcripts", rd.Blocked, len(rd.Transcripts))
	}
}

func TestWrongEventIsPermanent(t *testing.T) {
	env := handlertest.New(t)
	sub := handlertest.Of(env.Submitted(t, handlertest.Quickstart(), "team-a", "b1"), events.TypeJobSubmitted)[0]
	_, err := handlertest.Deliver(context.Background(), renderer.New(env.Store, ingest.FetchOptions{}, kind.RenderEnv{Log: quiet}).Handle, sub)
	if !bus.IsPermanent(err) || !strings.Contains(err.Error(), "job.submitted") {
		t.Fatalf("want a permanent error naming the event, got %v", err)
	}
}
