package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// countingKV counts the job records read through the storage port: each Get, and each
// value a watch delivers (a batch's records read whole, records.Store.EachJob over a
// bucket without its JetStream).
type countingKV struct {
	kv.KV
	reads atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.reads.Add(1)
	return c.KV.Get(ctx, key)
}

func (c *countingKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := c.KV.Watch(ctx, keys, opts...)
	if err != nil {
		return nil, err
	}
	cw := &countingWatcher{inner: w, out: make(chan jetstream.KeyValueEntry), done: make(chan struct{})}
	go func() {
		defer close(cw.out)
		for e := range w.Updates() {
			if e != nil {
				c.reads.Add(1)
			}
			select {
			case cw.out <- e:
			case <-cw.done:
				return
			}
		}
	}()
	return cw, nil
}

type countingWatcher struct {
	inner jetstream.KeyWatcher
	out   chan jetstream.KeyValueEntry
	done  chan struct{}
	once  sync.Once
}

func (w *countingWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.out }

func (w *countingWatcher) Stop() error {
	w.once.Do(func() { close(w.done) })
	return w.inner.Stop()
}

// countedIngress is an ingress over the fixture's buckets whose job records are read
// through jobs, and without the buckets' JetStream, so a batch read whole is read
// through the port too.
func countedIngress(t testing.TB, f *fixture) (string, *countingKV) {
	jobs := &countingKV{KV: f.running.Buckets.Jobs}
	b := f.running.Buckets
	b.Jobs, b.JS = jobs, nil
	h := ingress.New(ingress.Config{Tokens: map[string]string{tokA: "team-a"}, Pub: bus.NewPublisher(f.js, bus.ComparePayloads()), Store: f.env.Store, Buckets: b})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, jobs
}

// getJSON GETs path with team-a's token into v.
func getJSON(t testing.TB, base, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestReviewPageCostsWhatItHolds: a page of a completed batch's review queue reads the
// job records of its own items and no other. The queue is drawn over every AC once (the
// first page reads all 60 records, to draw the seeded sample); every later page of the
// listing, the status listing, the export and the gold set reads at most its ?limit=
// records, counted through the storage port, while the batch holds 60. Before, each
// page read every record of the batch again.
func TestReviewPageCostsWhatItHolds(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	const acs, queued, limit = 60, 20, 5
	sub := submitReviewed(t, c, acs, fmt.Sprintf("review: {count: %d}\n", queued))
	base, jobs := countedIngress(t, f)
	path := ingress.PathBatches + "/" + sub.BatchID + "/review"

	var first ingress.ReviewQueue
	getJSON(t, base, path+"?limit=5", &first)
	if n := jobs.reads.Load(); n < acs || n > acs+limit {
		t.Fatalf("the first page read %d records: want the batch's %d, to draw the queue, and its own %d", n, acs, limit)
	}
	for _, sub := range []struct{ name, query string }{
		{"listing", ""}, {"status", "&fields=status"}, {"export", ""}, {"gold", ""},
	} {
		p := path
		switch sub.name {
		case "export":
			p += "/export"
		case "gold":
			p += "/gold"
		}
		after, pages, items := "", 0, 0
		for {
			jobs.reads.Store(0)
			var pg struct {
				Items []json.RawMessage `json:"items"`
				Jobs  []json.RawMessage `json:"jobs"`
				Next  string            `json:"next"`
			}
			getJSON(t, base, p+"?limit="+fmt.Sprint(limit)+"&after="+url.QueryEscape(after)+sub.query, &pg)
			if n := jobs.reads.Load(); n > limit {
				t.Fatalf("%s: a page of at most %d items read %d job records (the batch holds %d)", sub.name, limit, n, acs)
			}
			pages++
			items += len(pg.Items) + len(pg.Jobs)
			if pg.Next == "" {
				break
			}
			after = pg.Next
		}
		want := queued
		if sub.name == "gold" {
			want = 0 // nobody reviewed yet
		}
		if items != want || pages < queued/limit {
			t.Errorf("%s: %d items over %d pages, want %d", sub.name, items, pages, want)
		}
	}
}

// BenchmarkReviewPage: one page of 100 items of a completed batch's review queue
// (?fields=status), the queue holding 1,000 items, as the batch grows from 2,000 ACs to
// 20,000. The page's cost stays what the page holds (records/op: the job records read
// through the storage port), whatever the batch holds:
// go test ./pkg/ingress -run '^$' -bench ReviewPage -benchtime 50x.
func BenchmarkReviewPage(b *testing.B) {
	for _, n := range []int{2_000, 20_000} {
		b.Run(fmt.Sprintf("acs=%d", n), func(b *testing.B) {
			buckets := natstest.Buckets(b, bus.Config{})
			batch := judgedBatch(b, buckets, n, 1000)
			jobs := &countingKV{KV: buckets.Jobs}
			counted := buckets
			counted.Jobs, counted.JS = jobs, nil
			store, err := fileblob.New(b.TempDir(), fileblob.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(ingress.New(ingress.Config{Tokens: map[string]string{tokA: "team-a"}, Store: store, Buckets: counted}))
			b.Cleanup(srv.Close)
			path := ingress.PathBatches + "/" + batch + "/review"
			var first ingress.ReviewQueue
			getJSON(b, srv.URL, path+"?fields=status&limit=500", &first)
			after := first.Items[len(first.Items)-1].Item
			jobs.reads.Store(0)
			b.ResetTimer()
			for b.Loop() {
				var pg ingress.ReviewQueue
				getJSON(b, srv.URL, path+"?fields=status&limit=100&after="+url.QueryEscape(after), &pg)
				if len(pg.Items) != 100 {
					b.Fatalf("%d items", len(pg.Items))
				}
			}
			b.ReportMetric(float64(jobs.reads.Load())/float64(b.N), "records/op")
		})
	}
}

// judgedBatch stores a completed batch of n ab ACs of team-a, each record derived by the
// rules from its submission and its verdict as the aggregator derives it, with a review
// sample of queued, and returns its id.
func judgedBatch(b *testing.B, buckets bus.Buckets, n, queued int) string {
	ctx := context.Background()
	const tenant = "team-a"
	batch := fmt.Sprintf("bench-%d", n)
	st := records.New(buckets)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	digest := strings.Repeat("ab", 32)
	for i := range n {
		id := fmt.Sprintf("AC-%d", i+1)
		spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "the notes are clear",
			Review: &events.ReviewSpec{Count: queued, Name: batch},
			KindPart: &ab.Spec{Threshold: 0.75, Positions: "single",
				Ours:      events.Source{Name: fmt.Sprintf("ours/%d.md", i), Blob: &events.Blob{SHA256: digest, MediaType: "text/markdown", Size: 900}},
				Reference: events.Source{Name: fmt.Sprintf("ref/%d.md", i), Blob: &events.Blob{SHA256: digest, MediaType: "text/markdown", Size: 900}}}}
		sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: n}, tenant, batch, id, 0, "", nil)
		sub.Time = t0
		res, err := rulebook.Apply(rulebook.State{Now: t0}, rulebook.Input{Event: sub, Link: sub.ID + ":" + digest})
		if err != nil {
			b.Fatal(err)
		}
		vote := events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "gpt-4o-mini"}, Order: "AB", Status: events.VoteOK,
			RawWinner: []string{"A", "B", "tie"}[i%3], Confidence: 0.8, BiggestGap: "g", Reasoning: "r"}
		in := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{vote}}, tenant, batch, id, 0, "", &sub.Envelope)
		in.Time = t0
		done, err := rulebook.Apply(rulebook.State{Job: res.Job, Now: t0}, rulebook.Input{Event: in, Link: in.ID + ":" + digest})
		if err != nil || done.Job == nil {
			b.Fatalf("decide %s: %v", id, err)
		}
		if _, err := st.CreateJob(ctx, done.Job); err != nil {
			b.Fatal(err)
		}
	}
	header, _ := json.Marshal(records.Batch{Tenant: tenant, Batch: batch, Size: n, CreatedAt: t0, Completion: &records.Completion{At: t0, By: "AC-1", Digest: digest}})
	if _, err := buckets.Batches.Put(ctx, records.BatchKey(tenant, batch), header); err != nil {
		b.Fatal(err)
	}
	return batch
}
