package judge_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	judgesvc "github.com/tribunal-dev/tribunal/services/judge"
)

// TestExternalJudgeParksThenResumes: a gated job naming the external judge is never
// answered by the service's model provider. Nobody having answered, its prompt is
// published and the gated event acknowledged with nothing published; once an answer is
// recorded, Resume derives the verdict from the recorded gated event, chained to it as the
// router chains a verdict, and the model provider was asked nothing.
func TestExternalJudgeParksThenResumes(t *testing.T) {
	env := handlertest.New(t)
	gd := gated(t, env, "AC-1")
	gd.Payload.(*events.GatesDone).Judges = []string{external.Name}
	wire, err := handlertest.Encode(gd)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wire.Data)
	x := external.New(memkv.New("external"), env.Store)
	model := handlertest.QuickstartProvider(t)
	svc := judgesvc.New(stage.JudgeEnv{Store: env.Store, Provider: model, Cache: env.Buckets.Cache, Instance: "j1", Log: quiet}, judgesvc.WithExternal(x))

	out, err := handlertest.Deliver(context.Background(), svc.Handle, gd)
	if err != nil || len(out) != 0 {
		t.Fatalf("unanswered external job: %d events, %v; want it parked", len(out), err)
	}
	calls, err := x.Calls(context.Background(), gd.Tenant, gd.BatchID)
	if err != nil || len(calls) != 1 || !calls[0].Parked() || calls[0].Prompt.Link != events.Link(gd.ID, hex.EncodeToString(sum[:])) {
		t.Fatalf("calls %+v, %v", calls, err)
	}
	if out, err := svc.Resume(context.Background(), calls[0]); err != nil || len(out) != 0 {
		t.Fatalf("resume without an answer: %d events, %v", len(out), err)
	}

	const answer = `{"raw_winner":"B","confidence":0.8,"biggest_gap":"B names the field."}`
	if err := x.Answer(context.Background(), calls[0].ID, external.Answer{Content: answer, By: "a person"}); err != nil {
		t.Fatal(err)
	}
	calls, _ = x.Calls(context.Background(), gd.Tenant, gd.BatchID)
	out, err = svc.Resume(context.Background(), calls[0])
	if err != nil || len(out) != 1 {
		t.Fatalf("resume: %d events, %v", len(out), err)
	}
	v := out[0]
	ve := v.Payload.(*events.VerdictEmitted)
	if v.Type != events.TypeVerdictEmitted || v.CausationID != gd.ID || strings.Join(v.Chain, ",") != strings.Join(events.ChainOf(gd.Envelope, hex.EncodeToString(sum[:])), ",") {
		t.Fatalf("verdict %+v chain %v", v.Envelope, v.Chain)
	}
	if len(ve.Votes) != 1 || ve.Votes[0].RawWinner != "B" || ve.Votes[0].Judge.Provider != external.Name || ve.Votes[0].Judge.Sampling.ReportedModel != "a person" || ve.Votes[0].Judge.Call == nil {
		t.Fatalf("votes %+v", ve.Votes)
	}
	if model.Calls() != 0 {
		t.Fatalf("the model provider was asked %d times", model.Calls())
	}
	// The same event id as Handle would have published, had the answer been there.
	direct, err := handlertest.Deliver(context.Background(), svc.Handle, gd)
	if err != nil || len(direct) != 1 || direct[0].ID != v.ID {
		t.Fatalf("handled after the answer: %+v, %v", direct, err)
	}

	// Without the external judge the job is refused, never answered by the model.
	plain := judgeWith(env, model)
	if _, err := handlertest.Deliver(context.Background(), plain, gd); !bus.IsPermanent(err) || !strings.Contains(err.Error(), "external judge") {
		t.Fatalf("plain judge: %v; want a permanent refusal", err)
	}
	gd.Payload.(*events.GatesDone).Judges = []string{external.Name, "gpt-4o"}
	if _, err := handlertest.Deliver(context.Background(), svc.Handle, gd); !bus.IsPermanent(err) {
		t.Fatalf("mixed panel: %v; want a permanent refusal", err)
	}
	if model.Calls() != 0 {
		t.Fatalf("the model provider was asked %d times", model.Calls())
	}
}
