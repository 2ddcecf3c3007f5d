package audit_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// findingKeys are a report's findings, comparable across two audits of one stream.
func findingKeys(rep audit.Report) string {
	var out []string
	for _, m := range rep.Mismatches {
		out = append(out, strings.Join([]string{string(m.Kind), m.Job, m.EventID, string(m.EventType), m.Field, m.FromID, m.Recorded, m.Derived}, "|"))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// onStream stores the fixture's messages on a fresh stream, split at recs[split] by a
// moment Since can name (split < 0: none); it returns the stream and that moment.
func onStream(ctx context.Context, t *testing.T, f *fixture, split int) (jetstream.JetStream, time.Time) {
	t.Helper()
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	if split < 0 {
		store(ctx, t, js, f.recs)
		return js, time.Time{}
	}
	store(ctx, t, js, f.recs[:split])
	time.Sleep(50 * time.Millisecond)
	since := time.Now()
	time.Sleep(50 * time.Millisecond)
	store(ctx, t, js, f.recs[split:])
	return js, since
}

// TestRunReadsTheStreamOnce: a batch whose ahead facts the stream shows where the audit
// needs them (no race between a cancel and its job, no redrive stored in pieces) is
// audited with one read of the stream, for --batch and for --since alike, and the one
// read finds what the audit of the whole slice finds: nothing on a clean batch, every
// alteration on a tampered one.
func TestRunReadsTheStreamOnce(t *testing.T) {
	tampered := func(t *testing.T) *fixture {
		f := staged(t)
		f.drop(f.find(events.TypeRenderDone, "AC-1"))
		f.forgeWinner(f.find(events.TypeIterationDecided, "AC-2"))
		return f
	}
	for name, build := range map[string]func(*testing.T) *fixture{"honest": honest, "redriven": redriven, "staged": staged, "tampered": tampered} {
		t.Run(name, func(t *testing.T) {
			f := build(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			js, _ := onStream(ctx, t, f, -1)
			want := f.audit()
			for _, flt := range []audit.Filter{{Tenant: f.tenant, BatchID: f.batch}, {Since: time.Now().Add(-time.Hour)}} {
				got, err := audit.Run(ctx, js, flt, f.store)
				if err != nil {
					t.Fatal(err)
				}
				if got.Reads != 1 || got.ReadAgain != "" {
					t.Fatalf("%+v: %d reads (%q), want 1", flt, got.Reads, got.ReadAgain)
				}
				if findingKeys(got) != findingKeys(want) || got.Events != want.Events || got.Decisions != want.Decisions ||
					len(got.Batches) != 1 || got.Batches[0].Digest != want.Batches[0].Digest {
					t.Fatalf("%+v: Run found%s\nAudit found%s", flt, dump(got), dump(want))
				}
				if name != "tampered" && !got.OK() || name == "tampered" && got.OK() {
					t.Fatalf("%+v: %s", flt, dump(got))
				}
			}
		})
	}
}

// TestRunReadsAgainWhenTheStreamContradictsTheRead: where the aggregator applied a job's
// cancel before inputs the stream holds ahead of it, the one read's audit (which applied
// it where stored) is contradicted by what the read concludes: the audit runs again over
// a second read with the cancels placed, says why, and is clean, as a planned replay is.
// From a --since in the middle of the race the early read comes in between (three).
func TestRunReadsAgainWhenTheStreamContradictsTheRead(t *testing.T) {
	f := cancelled(t)
	split := -1
	for i, r := range f.recs {
		if _, ok := r.Event.Payload.(*events.BatchCancelRequested); ok && split < 0 {
			split = i
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, since := onStream(ctx, t, f, split)
	for flt, reads := range map[*audit.Filter]int{{Tenant: f.tenant, BatchID: f.batch}: 2, {Since: since}: 3} {
		rep, err := audit.Run(ctx, js, *flt, f.store)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Reads != reads || !strings.Contains(rep.ReadAgain, "cancel") {
			t.Fatalf("%+v: %d reads (%q), want %d for the cancels", *flt, rep.Reads, rep.ReadAgain, reads)
		}
		if !rep.OK() || len(rep.Batches) != 1 || rep.Batches[0].Summary == nil || rep.Batches[0].Summary.Blocked != 3 {
			t.Fatalf("%+v: %+v%s", *flt, rep.Batches, dump(rep))
		}
	}
}

// TestRunCatchesAlteredAheadFacts: the facts an audit takes from further down the
// stream are recorded events like any other, and altering one is a finding whichever
// read decides: a cancelled job's outcome made to name its verdict as its cause (which
// moves its cancel after the verdict: the job re-derives compared, not cancelled), and
// a redrive request forged for a job that was not blocked, stored after the redrive's
// first request (the redrive's jobs then include it).
func TestRunCatchesAlteredAheadFacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("a cancelled job's cause", func(t *testing.T) {
		f := cancelled(t)
		var verdict string
		for _, r := range f.recs {
			if _, ok := r.Event.Payload.(*events.VerdictEmitted); ok && r.Event.JobID == "AC-2" {
				verdict = r.Event.ID
			}
		}
		f.rewrite(f.find(events.TypeJobBlocked, "AC-2"), func(e *events.Event) { e.CausationID = verdict })
		js, _ := onStream(ctx, t, f, -1)
		rep, err := audit.Run(ctx, js, audit.Filter{Tenant: f.tenant, BatchID: f.batch}, f.store)
		if err != nil {
			t.Fatal(err)
		}
		requireFinding(t, rep, audit.KindUnexplained, "AC-2", "")
		if findingKeys(rep) != findingKeys(f.audit()) {
			t.Fatalf("Run found%s\nAudit found%s", dump(rep), dump(f.audit()))
		}
	})
	t.Run("a redrive's jobs", func(t *testing.T) {
		f := redriven(t)
		rec := f.agg.Job(f.tenant, f.batch, "AC-1")
		f.publish(events.NewAttempt(&events.RenderRequested{Spec: rec.Spec}, f.tenant, f.batch, "AC-1", rec.Iteration, "", 1, nil))
		js, _ := onStream(ctx, t, f, -1)
		rep, err := audit.Run(ctx, js, audit.Filter{Tenant: f.tenant, BatchID: f.batch}, f.store)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Reads != 2 || !strings.Contains(rep.ReadAgain, "redrive 1") {
			t.Fatalf("%d reads (%q), want 2 for the redrive's jobs", rep.Reads, rep.ReadAgain)
		}
		requireFinding(t, rep, audit.KindUnexplained, "AC-1", "envelope.attempt")
		if findingKeys(rep) != findingKeys(f.audit()) {
			t.Fatalf("Run found%s\nAudit found%s", dump(rep), dump(f.audit()))
		}
	})
}

// redrivenTwo is a batch of three after `tribunal redrive` sent its two blocked jobs
// again as attempt 1; its first request names them (bus.MetaRedriveJobs) as named says
// (nil: no header, a stream recorded before the header was).
func redrivenTwo(t *testing.T, named []string) *fixture {
	f := newFixture(t)
	f.abJob("AC-1", 0, 3, ab.Assign("AC-1", 0).Label(ab.WinnerReference), 0.9)
	f.deadLettered("AC-2", 1, 3)
	f.deadLettered("AC-3", 2, 3)
	ids := []string{"AC-2", "AC-3"}
	f.agg.StartRedrive(f.tenant, f.batch, 1, ids)
	var reqs []events.Event
	for i, id := range ids {
		rec := f.agg.Job(f.tenant, f.batch, id)
		req := events.NewAttempt(&events.RenderRequested{Spec: rec.Spec}, f.tenant, f.batch, id, rec.Iteration, "", 1, nil)
		f.publish(req)
		if i == 0 {
			f.recs[len(f.recs)-1].Redrive = named
		}
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok",
			RawWinner: ab.Assign(req.JobID, 0).Label(ab.WinnerReference), Confidence: 0.8, BiggestGap: "the headings"}}
		f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, req.JobID, 0, "", &req.Envelope))
	}
	return f
}

// TestRunRedriveNamesItsJobs: a redrive of two jobs is pending on both from its first
// request, which the stream shows before the second. Its first request names them
// (bus.MetaRedriveJobs): one read. A stream recorded before the header was has none:
// two reads, and the report says why. A header altered to name other jobs than the
// requests send again is a finding, whichever read decides.
func TestRunRedriveNamesItsJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		name  string
		named []string
		reads int
		clean bool
	}{
		{"named", []string{"AC-2", "AC-3"}, 1, true},
		{"recorded before the header", nil, 2, true},
		{"one left out", []string{"AC-2"}, 2, false},
		{"one added", []string{"AC-1", "AC-2", "AC-3"}, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := redrivenTwo(t, c.named)
			want := f.audit()
			js, _ := onStream(ctx, t, f, -1)
			rep, err := audit.Run(ctx, js, audit.Filter{Tenant: f.tenant, BatchID: f.batch}, f.store)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Reads != c.reads || (c.reads > 1) != strings.Contains(rep.ReadAgain, "redrive 1") {
				t.Fatalf("%d reads (%q), want %d", rep.Reads, rep.ReadAgain, c.reads)
			}
			if findingKeys(rep) != findingKeys(want) {
				t.Fatalf("Run found%s\nAudit found%s", dump(rep), dump(want))
			}
			if c.clean {
				if !rep.OK() || len(rep.Batches) != 1 || rep.Batches[0].Summary == nil || rep.Batches[0].Summary.Blocked != 0 {
					t.Fatalf("%+v%s", rep.Batches, dump(rep))
				}
				return
			}
			requireFinding(t, rep, audit.KindMismatch, "AC-2", "header "+bus.MetaRedriveJobs)
		})
	}
	// One job's audit reads no other job's request: the header is its batch's to check.
	f := redrivenTwo(t, []string{"AC-2", "AC-3"})
	js, _ := onStream(ctx, t, f, -1)
	for _, job := range []string{"AC-2", "AC-3"} {
		rep, err := audit.RunJob(ctx, js, audit.Filter{Tenant: f.tenant, BatchID: f.batch}, job, f.store)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Mismatches {
			if m.Field == "header "+bus.MetaRedriveJobs {
				t.Fatalf("%s: %s", job, m)
			}
		}
	}
}

// severalBatches stores three batches of team-a one after the other on a fresh stream:
// b-0 honest, b-1 the cancelled batch whose cancels raced its jobs (the one read's
// audit of it is contradicted), b-2 tampered (a winner forged, a render dropped). Since
// splits b-1 at its batch cancel when split is set. It returns the messages as the
// stream numbers them, the batches' shared blob store and Since.
func severalBatches(ctx context.Context, t *testing.T, split bool) (jetstream.JetStream, []audit.Recorded, *fileblob.Store, time.Time) {
	t.Helper()
	st, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fixtureStore = st
	defer func() { fixtureStore, fixtureBatch = nil, "b-1" }()
	var recs []audit.Recorded
	cut := -1
	for _, b := range []struct {
		batch string
		build func(*testing.T) *fixture
	}{{"b-0", honest}, {"b-1", cancelled}, {"b-2", func(t *testing.T) *fixture {
		f := staged(t)
		f.drop(f.find(events.TypeRenderDone, "AC-1"))
		f.forgeWinner(f.find(events.TypeIterationDecided, "AC-2"))
		return f
	}}} {
		fixtureBatch = b.batch
		f := b.build(t)
		for _, r := range f.recs {
			if _, ok := r.Event.Payload.(*events.BatchCancelRequested); ok && split && cut < 0 {
				cut = len(recs)
			}
			r.Seq = uint64(len(recs) + 1)
			recs = append(recs, r)
		}
	}
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	if cut < 0 {
		store(ctx, t, js, recs)
		return js, recs, st, time.Now().Add(-time.Hour)
	}
	store(ctx, t, js, recs[:cut])
	time.Sleep(50 * time.Millisecond)
	since := time.Now()
	time.Sleep(50 * time.Millisecond)
	store(ctx, t, js, recs[cut:])
	return js, recs, st, since
}

// TestRunReadsAgainOnlyTheContradictedBatches: a --since audit of several batches where
// the read contradicts what the audit was told of one (b-1's cancels raced its jobs)
// reads the stream again for that batch only, keeping the one read's audit of the
// others, and reports what a planned replay reports: the same findings (b-2's
// tampering), counts, decisions and batches. From a --since inside b-1 the batch also
// began before Since (the early read comes in between, three reads); b-0 is then not
// selected.
func TestRunReadsAgainOnlyTheContradictedBatches(t *testing.T) {
	for _, split := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		js, recs, st, since := severalBatches(ctx, t, split)
		var selected []audit.Recorded
		for _, r := range recs {
			if !split || r.Event.BatchID != "b-0" {
				selected = append(selected, r)
			}
		}
		want := audit.Audit(selected, st)
		got, err := audit.Run(ctx, js, audit.Filter{Since: since}, st)
		if err != nil {
			t.Fatal(err)
		}
		reads := 2
		if split {
			reads = 3
		}
		if got.Reads != reads || !strings.Contains(got.ReadAgain, "b-1") || strings.Join(got.ReadAgainBatches, ",") != "team-a/b-1" {
			t.Fatalf("split %v: %d reads of %v (%q), want %d reading b-1 again", split, got.Reads, got.ReadAgainBatches, got.ReadAgain, reads)
		}
		if n := countBatch(selected, "b-1"); got.ReadAgainMessages != n {
			t.Fatalf("split %v: the second read delivered %d messages, want b-1's %d", split, got.ReadAgainMessages, n)
		}
		if from := uint64(countBatch(recs, "b-0") + 1); got.ReadAgainFrom != from {
			t.Fatalf("split %v: the second read began at seq %d, want b-1's first, %d", split, got.ReadAgainFrom, from)
		}
		if findingKeys(got) != findingKeys(want) || got.Events != want.Events || got.Decisions != want.Decisions || got.Jobs != want.Jobs ||
			got.History != want.History || len(got.Unverified) != len(want.Unverified) || len(got.Batches) != len(want.Batches) {
			t.Fatalf("split %v: Run found (%d events, %d decisions, %d jobs)%s\nAudit found (%d events, %d decisions, %d jobs)%s",
				split, got.Events, got.Decisions, got.Jobs, dump(got), want.Events, want.Decisions, want.Jobs, dump(want))
		}
		for i, b := range want.Batches {
			if g := got.Batches[i]; g.Batch != b.Batch || g.Digest != b.Digest || g.Complete != b.Complete || g.Jobs != b.Jobs {
				t.Fatalf("split %v: batch %+v, want %+v", split, g, b)
			}
		}
		if got.Count(audit.KindMismatch) == 0 || has(got, func(m audit.Mismatch) bool { return m.Batch != "b-2" }) {
			t.Fatalf("split %v: want b-2's tampering alone%s", split, dump(got))
		}
	}
}

func countBatch(recs []audit.Recorded, batch string) int {
	n := 0
	for _, r := range recs {
		if r.Event.BatchID == batch {
			n++
		}
	}
	return n
}
