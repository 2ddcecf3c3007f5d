package aggregator_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/services/aggregator"
	"github.com/tribunal-dev/tribunal/services/gater"
	judgesvc "github.com/tribunal-dev/tribunal/services/judge"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

var quiet = slog.New(slog.DiscardHandler)

// handlers wires the four services over env as internal/app does, minus the bus.
func handlers(env *handlertest.Env, p judge.Provider) (map[events.Type]bus.Handler, *aggregator.Service) {
	agg := aggregator.New(env.Buckets, env.Store, quiet)
	r := renderer.New(env.Store, artifact.FetchOptions{}, stage.RenderEnv{Provider: p, Cache: env.Buckets.Cache, Log: quiet})
	g := gater.New(stage.GateEnv{Store: env.Store, Views: env.Buckets.Views, Log: quiet})
	j := judgesvc.New(stage.JudgeEnv{Store: env.Store, Provider: p, Cache: env.Buckets.Cache, Log: quiet})
	return map[events.Type]bus.Handler{
		events.TypeJobSubmitted:    agg.Handle,
		events.TypeRenderRequested: r.Handle,
		events.TypeRenderDone:      g.Handle,
		events.TypeGatesDone:       j.Handle,
		events.TypeGatesFailed:     agg.Handle,
		events.TypeVerdictEmitted:  agg.Handle,
	}, agg
}

// run drives the quickstart through every service and returns what was published.
func run(t *testing.T, env *handlertest.Env) []events.Event {
	t.Helper()
	hs, _ := handlers(env, handlertest.QuickstartProvider(t))
	return handlertest.Drive(t, hs, env.Submitted(t, handlertest.Quickstart(), "team-a", "b1")...)
}

func TestQuickstartIsDecided(t *testing.T) {
	env := handlertest.New(t)
	evs := run(t, env)
	st := records.New(env.Buckets)
	jobs, err := st.LoadJobs(context.Background(), "team-a", "b1")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 8 {
		t.Fatalf("%d job records, want 8", len(jobs))
	}
	blocked := map[string]string{}
	for _, j := range jobs {
		if j.Status == events.StatusPending {
			t.Errorf("%s still pending", j.ACID)
		}
		if j.Status == events.StatusBlocked {
			blocked[j.ACID] = j.BlockReason
		}
	}
	if len(blocked) != 2 || !strings.Contains(blocked["AC-9"], "video") || blocked["AC-10"] == "" {
		t.Fatalf("blocked: %v, want AC-9 (video) and AC-10 (missing artifact)", blocked)
	}
	if n := len(handlertest.Of(evs, events.TypeBatchCompleted)); n != 1 {
		t.Fatalf("%d batch.completed, want 1", n)
	}
	if n := len(handlertest.Of(evs, events.TypeManifestEmitted)); n == 0 {
		t.Fatal("no manifest.emitted")
	}
	h, _, err := st.Header(context.Background(), "team-a", "b1")
	if err != nil || h == nil || h.Completion == nil {
		t.Fatalf("header %+v: %v", h, err)
	}
	if s := h.Completion.Summary; s.Total != 8 || s.Blocked != 2 {
		t.Fatalf("summary %+v", s)
	}
}

// A redelivered input (the router acks after publishing, so a crash in between
// redelivers) changes no record and publishes nothing under a new id.
func TestRedeliveryChangesNothing(t *testing.T) {
	env := handlertest.New(t)
	evs := run(t, env)
	_, agg := handlers(env, nil)
	st := records.New(env.Buckets)
	before := snapshot(t, st)
	ids := map[string]bool{}
	for _, e := range evs {
		ids[e.ID] = true
	}
	for _, e := range evs {
		switch e.Type {
		case events.TypeJobSubmitted, events.TypeGatesFailed, events.TypeVerdictEmitted:
		default:
			continue
		}
		out, err := handlertest.Deliver(context.Background(), agg.Handle, e)
		if err != nil {
			t.Fatalf("redeliver %s %s: %v", e.Type, e.JobID, err)
		}
		for _, o := range out {
			if !ids[o.ID] {
				t.Errorf("redelivered %s of %s published a new %s %s", e.Type, e.JobID, o.Type, o.ID)
			}
		}
	}
	if after := snapshot(t, st); after != before {
		t.Fatalf("redelivery changed the records:\nbefore %s\nafter  %s", before, after)
	}
}

func snapshot(t *testing.T, st records.Store) string {
	t.Helper()
	var b strings.Builder
	err := st.EachJob(context.Background(), "team-a", "b1", func(j *records.Job) error {
		b.WriteString(j.ACID + ":" + string(j.Status) + ":" + j.DecidedBy + ";")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Several aggregator instances share one consumer: the same verdict handled by two at
// once is decided once.
func TestConcurrentInstancesDecideOnce(t *testing.T) {
	env := handlertest.New(t)
	p := handlertest.QuickstartProvider(t)
	hs, _ := handlers(env, p)
	// Everything up to the verdicts, without deciding them.
	delete(hs, events.TypeVerdictEmitted)
	evs := handlertest.Drive(t, hs, env.Submitted(t, handlertest.Quickstart(), "team-a", "b1")...)
	verdicts := handlertest.Of(evs, events.TypeVerdictEmitted)
	if len(verdicts) == 0 {
		t.Fatal("no verdicts")
	}
	a1, a2 := aggregator.New(env.Buckets, env.Store, quiet), aggregator.New(env.Buckets, env.Store, quiet)
	var mu sync.Mutex
	decided := map[string]int{}
	completed := 0
	var wg sync.WaitGroup
	for _, v := range verdicts {
		for _, a := range []*aggregator.Service{a1, a2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := handlertest.Deliver(context.Background(), a.Handle, v)
				if err != nil {
					t.Errorf("%s: %v", v.JobID, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, o := range out {
					switch o.Type {
					case events.TypeIterationDecided:
						decided[o.ID]++
					case events.TypeBatchCompleted:
						completed++
					}
				}
			}()
		}
	}
	wg.Wait()
	// Both instances may announce a decision (the second as a redelivery), but under
	// one id per job.
	perJob := map[string]bool{}
	for id := range decided {
		perJob[id] = true
	}
	if len(perJob) != len(verdicts) {
		t.Fatalf("%d decision ids for %d verdicts: %v", len(perJob), len(verdicts), decided)
	}
	if completed == 0 {
		t.Fatal("the batch never completed")
	}
}

// A verdict for a job not recorded yet (its submission still in flight) is retried, not
// dropped and not dead-lettered.
func TestVerdictBeforeSubmissionIsRetried(t *testing.T) {
	v := handlertest.Of(run(t, handlertest.New(t)), events.TypeVerdictEmitted)[0]
	_, agg := handlers(handlertest.New(t), nil)
	_, err := handlertest.Deliver(context.Background(), agg.Handle, v)
	if err == nil || bus.IsPermanent(err) {
		t.Fatalf("want a retryable error, got %v", err)
	}
}

// A submission whose spec names another AC than its envelope is refused for good.
func TestSubmissionEnvelopeMismatchIsPermanent(t *testing.T) {
	env := handlertest.New(t)
	subs := handlertest.Of(env.Submitted(t, handlertest.Quickstart(), "team-a", "b1"), events.TypeJobSubmitted)
	ev := subs[0]
	ev.JobID = "AC-other"
	_, agg := handlers(env, nil)
	_, err := handlertest.Deliver(context.Background(), agg.Handle, ev)
	if !bus.IsPermanent(err) {
		t.Fatalf("want a permanent refusal, got %v", err)
	}
}

// A dead letter blocks its job with the reason, but only for the tenant and type of the
// subject its event was published on.
func TestDeadLetters(t *testing.T) {
	env := handlertest.New(t)
	subs := handlertest.Of(env.Submitted(t, handlertest.Quickstart(), "team-a", "b1"), events.TypeJobSubmitted)
	_, agg := handlers(env, nil)
	ctx := context.Background()
	if _, err := handlertest.Deliver(ctx, agg.Handle, subs[0]); err != nil {
		t.Fatal(err)
	}
	render := events.New(&events.RenderRequested{Spec: subs[0].Payload.(*events.JobSubmitted).Spec}, "team-a", "b1", subs[0].JobID, 0, "", &subs[0].Envelope)
	data, err := events.Encode(render)
	if err != nil {
		t.Fatal(err)
	}
	st := records.New(env.Buckets)

	other, _ := events.Subject("team-b", events.TypeRenderRequested)
	out, err := agg.DeadLetter(ctx, bus.DeadLetter{Payload: data, Service: bus.Renderer, Reason: "boom", Subject: other})
	if err != nil || len(out) != 0 {
		t.Fatalf("dead letter from another tenant's subject: %v %v", out, err)
	}
	if j, _, _ := st.Job(ctx, "team-a", "b1", subs[0].JobID); j.Status != events.StatusPending {
		t.Fatalf("refused dead letter changed the job: %s", j.Status)
	}

	own, _ := events.Subject("team-a", events.TypeRenderRequested)
	out, err = agg.DeadLetter(ctx, bus.DeadLetter{Payload: data, Service: bus.Renderer, Reason: "browser crashed", Subject: own})
	if err != nil || len(handlertest.Of(out, events.TypeJobBlocked)) != 1 {
		t.Fatalf("dead letter: %v %v", out, err)
	}
	j, _, _ := st.Job(ctx, "team-a", "b1", subs[0].JobID)
	if j.Status != events.StatusBlocked || !strings.Contains(j.BlockReason, "browser crashed") {
		t.Fatalf("job %s: %q", j.Status, j.BlockReason)
	}

	// A dead letter for a job never submitted is dropped, not recorded.
	ghost := events.New(&events.RenderRequested{Spec: subs[1].Payload.(*events.JobSubmitted).Spec}, "team-a", "b1", "AC-ghost", 0, "", nil)
	data, _ = events.Encode(ghost)
	if out, err := agg.DeadLetter(ctx, bus.DeadLetter{Payload: data, Service: bus.Renderer, Reason: "x", Subject: own}); err != nil || len(out) != 0 {
		t.Fatalf("ghost dead letter: %v %v", out, err)
	}
	if _, _, err := st.Job(ctx, "team-a", "b1", "AC-ghost"); !errors.Is(err, records.ErrNotRecorded) {
		t.Fatalf("ghost recorded: %v", err)
	}
}
