package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// The 100,000-AC batch page: go test ./internal/console -run '^$' -bench BatchPage100k
// -benchtime 20x. The batch is built as the aggregator builds one: every job record
// derived by the rules from its submission and its verdict and stored in the jobs
// bucket, the completion folded over them with the index kept, the index and manifests
// stored as blobs. The console reads the index, never the 100,000 records.

const scaleACs = 100_000

// pageBudget is the most a page of the AC table may weigh.
const pageBudget = 300 << 10

type scaleBatch struct {
	handler func() http.Handler
	path    string
}

func buildScaleBatch(b *testing.B) scaleBatch {
	b.Helper()
	ctx := context.Background()
	buckets := natstest.Buckets(b, bus.Config{})
	store, err := fileblob.New(b.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	const tenant, batch = "team-a", "scale-100k"
	st := records.New(buckets)
	fold := rulebook.NewFold(tenant, batch)
	fold.KeepIndex()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	digest := strings.Repeat("ab", 32)
	call := &events.Blob{SHA256: strings.Repeat("cd", 32), MediaType: "application/json", Size: 4096}
	for i := 0; i < scaleACs; i++ {
		id := fmt.Sprintf("AC-%d", i+1)
		spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: fmt.Sprintf("Screen %d explains what changed and what to do next, in plain words.", i%977),
			KindPart: &ab.Spec{Threshold: 0.75, Positions: "single",
				Ours:      events.Source{Name: fmt.Sprintf("ours/screen-%d.md", i), Blob: &events.Blob{SHA256: digest, MediaType: "text/markdown", Size: 900}},
				Reference: events.Source{Name: fmt.Sprintf("reference/screen-%d.md", i), Blob: &events.Blob{SHA256: digest, MediaType: "text/markdown", Size: 1100}}}}
		sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: scaleACs}, tenant, batch, id, 0, "", nil)
		sub.Time = t0
		res, err := rulebook.Apply(rulebook.State{Now: t0}, rulebook.Input{Event: sub, Link: sub.ID + ":" + digest})
		if err != nil {
			b.Fatal(err)
		}
		var in events.Event
		if i%40 == 39 {
			in = events.New(&events.GatesFailed{Kind: events.KindAB, ACID: id, Blocked: "ours artifact: unsupported artifact: video (.mp4)"}, tenant, batch, id, 0, "", &sub.Envelope)
		} else {
			raw := []string{"A", "B", "tie"}[i%3]
			vote := events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: []string{"gpt-4o-mini", "gpt-4.1"}[i%2], PromptTokens: 900 + i%400,
				CompletionTokens: 40 + i%60, LatencyMillis: int64(700 + i%2300), Cached: i%5 == 0, Call: call},
				Order: "AB", Status: events.VoteOK, RawWinner: raw, Confidence: float64(50+i%50) / 100,
				BiggestGap: fmt.Sprintf("Slot A leaves out step %d of the migration the other spells out.", i%13), Reasoning: "r"}
			in = events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{vote}}, tenant, batch, id, 0, "", &sub.Envelope)
		}
		in.Time = t0.Add(time.Duration(i) * time.Millisecond)
		done, err := rulebook.Apply(rulebook.State{Job: res.Job, Now: in.Time}, rulebook.Input{Event: in, Link: in.ID + ":" + digest})
		if err != nil || done.Job == nil {
			b.Fatalf("decide %s: %v", id, err)
		}
		if _, err := st.CreateJob(ctx, done.Job); err != nil {
			b.Fatal(err)
		}
		fold.Add(done.Job)
	}
	c, err := fold.Complete(fmt.Sprintf("AC-%d", scaleACs), 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, data := range c.Manifests {
		if _, err := blob.PutBytes(ctx, store, tenant, data, "application/json"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := blob.PutBytes(ctx, store, tenant, c.Index, c.Completion.Index.MediaType); err != nil {
		b.Fatal(err)
	}
	comp := c.Completion
	header, _ := json.Marshal(records.Batch{Tenant: tenant, Batch: batch, Size: scaleACs, Source: "scale/batch.yaml", CreatedAt: t0, Completion: &comp})
	if _, err := buckets.Batches.Put(ctx, records.BatchKey(tenant, batch), header); err != nil {
		b.Fatal(err)
	}
	b.Logf("index %d KiB for %d ACs", len(c.Index)>>10, scaleACs)
	return scaleBatch{
		handler: func() http.Handler { return console.New(console.Config{Buckets: buckets, Store: store}) },
		path:    "/t/" + tenant + "/b/" + batch,
	}
}

// get serves one page and checks its weight.
func getPage(b *testing.B, h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 {
		b.Fatalf("%s: %d %s", path, rec.Code, body)
	}
	if len(body) > pageBudget {
		b.Fatalf("%s weighs %d KiB, over %d KiB", path, len(body)>>10, pageBudget>>10)
	}
	return len(body)
}

func BenchmarkBatchPage100k(b *testing.B) {
	sb := buildScaleBatch(b)
	// cold: a console that has not read the batch yet (its first page after a start).
	b.Run("cold", func(b *testing.B) {
		size := 0
		for i := 0; i < b.N; i++ {
			size = getPage(b, sb.handler(), sb.path)
		}
		b.ReportMetric(float64(size), "bytes/page")
	})
	warm := sb.handler()
	getPage(b, warm, sb.path)
	for _, bc := range []struct{ name, query string }{
		{"first-page", ""},
		{"page-500", "?page=500"},
		{"filter-sort", "?status=compared&outcome=reference&sort=confidence&dir=desc"},
		{"search", "?q=step+7+of"},
		{"per-500", "?per=500&page=3"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			size := 0
			for i := 0; i < b.N; i++ {
				size = getPage(b, warm, sb.path+bc.query)
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}
