package console_test

import (
	"context"
	"encoding/json"
	"image/color"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestRecordsWithoutServices writes the services' state by hand: a running batch (its
// progress from the completion shards, its rows from the job records), the keys the
// batch list must skip, and the job-record fields the aggregator does not write yet
// (equivalence transcripts, a rubric view's previous render), which the console shows
// as soon as they are there.
func TestRecordsWithoutServices(t *testing.T) {
	ctx := context.Background()
	b := natstest.Buckets(t, bus.Config{Memory: true})
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	put := func(data, mt string) events.Blob {
		a, err := blob.PutBytes(ctx, store, tenantA, []byte(data), mt)
		if err != nil {
			t.Fatal(err)
		}
		return events.Blob{SHA256: a.Ref.SHA256, MediaType: mt, Size: a.Size}
	}
	kvPut := func(kv interface {
		Put(context.Context, string, []byte) (uint64, error)
	}, key string, v any) {
		data, ok := v.([]byte)
		if !ok {
			data, _ = json.Marshal(v)
		}
		if _, err := kv.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
	// A running batch of two jobs, one of them final; and another team's batch.
	kvPut(b.Batches, "team-a.run1", records.Batch{Tenant: tenantA, Batch: "run1", Size: 2, CreatedAt: time.Now().UTC()})
	kvPut(b.Batches, records.ShardKey(tenantA, "run1", 0, 0), []byte{0b01})
	kvPut(b.Batches, "team-a.run1.spotcheck", []byte("v"))
	kvPut(b.Batches, "team-b.other", records.Batch{Tenant: tenantB, Batch: "other", Size: 1, CreatedAt: time.Now().UTC()})

	orig, cand := put("# doc\noriginal\n", "text/markdown"), put("# doc\ncandidate\n", "text/markdown")
	transcripts := []events.Transcript{
		{CaseID: "c1", Side: "original", Blob: put("ORIGINAL RUN: asked for the component <i>first</i>", "text/plain")},
		{CaseID: "c1", Side: "candidate", Blob: put("CANDIDATE RUN: asked for the component", "text/plain")},
	}
	eqResult, _ := json.Marshal(equivalence.Result{Transcripts: transcripts,
		Report: equivalence.Report{Cases: []equivalence.CaseResult{{CaseID: "c1", Verdict: equivalence.VerdictEquivalent, Status: equivalence.StatusOK}}}})
	eq := records.Job{Tenant: tenantA, Batch: "run1", ACID: "AC-eq", Index: 0, BatchSize: 2, Status: events.StatusCompared,
		Spec: events.JobSpec{Kind: events.KindEquivalence, ACID: "AC-eq", KindPart: &equivalence.Spec{
			Original: events.Source{Name: "a.md", Blob: &orig}, Candidate: events.Source{Name: "b.md", Blob: &cand},
			Cases: []events.Case{{ID: "c1", Tag: "happy", Input: "do it"}}, Variant: events.VariantSkill, Round: 1}},
		Result: eqResult}
	kvPut(b.Jobs, records.JobKey(tenantA, "run1", "AC-eq"), eq)

	render := put(pngBytes(t, 120, 90, color.RGBA{0, 128, 0, 255}), "image/png")
	prev := put(pngBytes(t, 90, 90, color.RGBA{128, 0, 0, 255}), "image/png")
	rs := &rubricwire.Spec{Feature: "f", Target: "list", State: "empty", Appearance: "dark", Route: "http://x", Adapter: "web", Mode: events.ModeHeadless, ReferenceStatus: "present"}
	loop, _ := json.Marshal(rubric.State{Render: &render, Previous: &prev})
	view := records.Job{Tenant: tenantA, Batch: "run1", ACID: "f--list--empty--dark", Index: 1, BatchSize: 2, Status: events.StatusPending,
		Spec: events.JobSpec{Kind: events.KindRubric, ACID: "f--list--empty--dark", KindPart: rs}, Loop: loop}
	kvPut(b.Jobs, records.JobKey(tenantA, "run1", view.ACID), view)

	srv := httptest.NewServer(console.New(console.Config{Buckets: b, Store: store, Tenants: map[string]string{tokA: tenantA}}))
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)

	_, body := w.get("/", tokA)
	if strings.Count(body, `href="/t/team-a/b/`) != 1 || !strings.Contains(body, "1/2") || strings.Contains(body, "other") || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("index of a running batch: %s", body)
	}
	_, body = w.get("/t/team-a/b/run1", tokA)
	for _, want := range []string{"AC-eq", "f--list--empty--dark", "running", `http-equiv="refresh"`, "1/2 jobs final"} {
		if !strings.Contains(body, want) {
			t.Errorf("running batch page lacks %q", want)
		}
	}
	_, body = w.get("/t/team-a/b/run1/j/AC-eq", tokA)
	if !strings.Contains(body, "ORIGINAL RUN: asked for the component &lt;i&gt;first&lt;/i&gt;") || !strings.Contains(body, "CANDIDATE RUN") || strings.Contains(body, `id="no-transcripts"`) {
		t.Fatalf("equivalence page with transcripts: %s", body)
	}
	_, body = w.get("/t/team-a/b/run1/j/f--list--empty--dark", tokA)
	if !strings.Contains(body, "/blob/team-a/"+prev.SHA256) || !strings.Contains(body, "the previous render the judge ranked this one against") || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("rubric page with a previous render: %s", body)
	}
}
