package gater_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/services/gater"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

var quiet = slog.New(slog.DiscardHandler)

// rendered is the quickstart AC's render.done, as the renderer publishes it.
func rendered(t *testing.T, env *handlertest.Env, ac string) events.Event {
	t.Helper()
	r := renderer.New(env.Store, artifact.FetchOptions{}, stage.RenderEnv{Log: quiet})
	for _, s := range env.Submitted(t, handlertest.Quickstart(), "team-a", "b1") {
		if s.JobID != ac {
			continue
		}
		req := events.New(&events.RenderRequested{Spec: s.Payload.(*events.JobSubmitted).Spec}, s.Tenant, s.BatchID, s.JobID, 0, "", &s.Envelope)
		out, err := handlertest.Deliver(context.Background(), r.Handle, req)
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	t.Fatalf("no %s in the quickstart", ac)
	return events.Event{}
}

func gate(t *testing.T, env *handlertest.Env, ev events.Event) events.Event {
	t.Helper()
	out, err := handlertest.Deliver(context.Background(), gater.New(stage.GateEnv{Store: env.Store, Views: env.Buckets.Views, Log: quiet}).Handle, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].CausationID != ev.ID {
		t.Fatalf("published %v, want one event caused by the render", out)
	}
	return out[0]
}

// What passes the gates reaches the judge blind: two slots, and nothing that names a
// role, a path or the batch's files.
func TestPassingJobGoesBlind(t *testing.T) {
	env := handlertest.New(t)
	out := gate(t, env, rendered(t, env, "AC-1"))
	gd, ok := out.Payload.(*events.GatesDone)
	if !ok {
		t.Fatalf("published %s: %+v", out.Type, out.Payload)
	}
	if len(gd.Slots) != 2 || gd.Slots[0].Name != "A" || gd.Slots[1].Name != "B" {
		t.Fatalf("slots %+v", gd.Slots)
	}
	wire, err := events.Encode(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"ours", "reference", "release-notes", "batch.yaml"} {
		if bytes.Contains(wire, []byte(leak)) {
			t.Errorf("gates.done carries %q", leak)
		}
	}
}

// A render that was blocked never reaches a judge: the reason goes on as it is.
func TestBlockedRenderFails(t *testing.T) {
	env := handlertest.New(t)
	rd := rendered(t, env, "AC-10")
	reason := rd.Payload.(*events.RenderDone).Blocked
	if reason == "" {
		t.Fatal("AC-10 (no artifact) rendered")
	}
	gf, ok := gate(t, env, rd).Payload.(*events.GatesFailed)
	if !ok || gf.Blocked != reason {
		t.Fatalf("want gates.failed blocked %q, got %+v", reason, gf)
	}
}

// An artifact no judge can read fairly (a video) is stopped at the gate, named.
func TestUnreadableArtifactFails(t *testing.T) {
	env := handlertest.New(t)
	out := gate(t, env, rendered(t, env, "AC-9"))
	gf, ok := out.Payload.(*events.GatesFailed)
	if !ok {
		t.Fatalf("AC-9 (video) passed: %s", out.Type)
	}
	if why := gf.Blocked + events.FailedGates(gf.Gates); !strings.Contains(why, "video") {
		t.Fatalf("reason does not name the video: %+v", gf)
	}
}

// An artifact missing from the blob store (expired, or a forged digest) fails the gate
// with a reason; it is not retried forever.
func TestMissingBlobFails(t *testing.T) {
	env := handlertest.New(t)
	ev := rendered(t, env, "AC-1")
	rd := ev.Payload.(*events.RenderDone)
	for role, a := range rd.Artifacts {
		a.Blob.SHA256 = strings.Repeat("0", 64)
		rd.Artifacts[role] = a
	}
	if _, ok := gate(t, env, ev).Payload.(*events.GatesFailed); !ok {
		t.Fatal("a job whose artifacts are missing passed its gates")
	}
}

func TestWrongEventIsPermanent(t *testing.T) {
	env := handlertest.New(t)
	sub := handlertest.Of(env.Submitted(t, handlertest.Quickstart(), "team-a", "b1"), events.TypeJobSubmitted)[0]
	_, err := handlertest.Deliver(context.Background(), gater.New(stage.GateEnv{Store: env.Store, Log: quiet}).Handle, sub)
	if !bus.IsPermanent(err) {
		t.Fatalf("want a permanent error, got %v", err)
	}
}
