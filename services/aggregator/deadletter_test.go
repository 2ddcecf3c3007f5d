package aggregator_test

import (
	"context"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// TestDeadLettersActOnlyForTheirSubject: a dead letter acts only for the tenant and type
// of the subject its event was published on, and only on a job that was submitted;
// everything else is dropped and counted as refused by reason. (Succeeded on f5dc4e7:
// its dead-letter handler acted on the envelope alone, so team-a, publishing team-b's
// envelope on its own subject, blocked team-b's jobs and created a fake team-b batch.)
func TestDeadLettersActOnlyForTheirSubject(t *testing.T) {
	m := telemetry.Reset()
	b := natstest.Buckets(t, bus.Config{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	agg := aggregator.New(b, store, nil)
	spec := events.JobSpec{Kind: events.KindAB, ACID: "AC-1", Criterion: "c", KindPart: &ab.Spec{
		Ours:      events.Source{Name: "o", Error: "missing artifact: o"},
		Reference: events.Source{Name: "r", Error: "missing artifact: r"},
		Threshold: 0.75,
	}}
	// team-b's submission, in an envelope team-a wrote, published on team-a's subject.
	forged := events.New(&events.JobSubmitted{Spec: spec, BatchSize: 1}, "team-b", "batch-1", "AC-1", 0, "", nil)
	data, err := events.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	teamA, _ := events.Subject("team-a", events.TypeJobSubmitted)
	out, err := agg.DeadLetter(ctx, bus.DeadLetter{Payload: data, Service: bus.Aggregator, Reason: "refused", Subject: teamA})
	if err != nil || len(out) != 0 {
		t.Fatalf("dead letter of team-b's envelope on team-a's subject: out %d, err %v; want dropped", len(out), err)
	}
	if h, _, err := records.New(b).Header(ctx, "team-b", "batch-1"); err != nil || h != nil {
		t.Fatalf("team-b's batch header %+v (err %v): the dead letter acted for team-b", h, err)
	}
	if got := m.Value("tribunal_refusals_total", "service=aggregator", "reason="+events.OriginTenant); got != 1 {
		t.Errorf("refusals for another tenant: %v, want 1", got)
	}

	// A dead letter on its own subject, for a job never submitted, is dropped and counted.
	verdictSubject, _ := events.Subject("team-b", events.TypeVerdictEmitted)
	orphan := events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-7", Blocked: "x"}, "team-b", "batch-1", "AC-7", 0, "", nil)
	orphanData, err := events.Encode(orphan)
	if err != nil {
		t.Fatal(err)
	}
	gfSubject, _ := events.Subject("team-b", events.TypeGatesFailed)
	if out, err := agg.DeadLetter(ctx, bus.DeadLetter{Payload: orphanData, Service: bus.Gater, Reason: "x", Subject: gfSubject}); err != nil || len(out) != 0 {
		t.Fatalf("dead letter of a job never submitted: out %d, err %v", len(out), err)
	}
	if got := m.Value("tribunal_refusals_total", "service=aggregator", "reason="+aggregator.RefusedNotSubmitted); got != 1 {
		t.Errorf("refusals of never-submitted jobs: %v, want 1", got)
	}
	// ... as is one that names no job at all, and one whose type its subject contradicts.
	if out, err := agg.DeadLetter(ctx, bus.DeadLetter{Payload: []byte("junk"), Service: bus.Judge, Subject: verdictSubject}); err != nil || len(out) != 0 {
		t.Fatalf("undecodable dead letter: out %d, err %v", len(out), err)
	}
	if got := m.Value("tribunal_refusals_total", "service=aggregator", "reason="+aggregator.RefusedNoJob); got != 1 {
		t.Errorf("refusals of dead letters without a job: %v, want 1", got)
	}
	if out, err := agg.DeadLetter(ctx, bus.DeadLetter{Payload: orphanData, Service: bus.Gater, Subject: verdictSubject}); err != nil || len(out) != 0 {
		t.Fatalf("dead letter on another type's subject: out %d, err %v", len(out), err)
	}
	if got := m.Value("tribunal_refusals_total", "service=aggregator", "reason="+events.OriginType); got != 1 {
		t.Errorf("refusals for another type: %v, want 1", got)
	}
}
