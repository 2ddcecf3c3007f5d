package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/internal/testutil/syncbuf"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// liveJobs makes a running batch's job records as the aggregator does (pkg/rulebook):
// submitted, then decided in one of a few ways.
type liveJobs struct {
	tenant, batch string
	size          int
	t0            time.Time
}

const liveDigest = "abababababababababababababababababababababababababababababababab"

func (lj liveJobs) submitted(tb testing.TB, i int) *records.Job {
	tb.Helper()
	j, _ := lj.submit(tb, i)
	return j
}

func (lj liveJobs) submit(tb testing.TB, i int) (*records.Job, *events.Envelope) {
	tb.Helper()
	id := fmt.Sprintf("AC-%d", i)
	spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: fmt.Sprintf("Screen %d says what changed.", i%97),
		KindPart: &ab.Spec{Threshold: 0.75, Positions: "single",
			Ours:      events.Source{Name: fmt.Sprintf("ours/s-%d.md", i), Blob: &events.Blob{SHA256: liveDigest, MediaType: "text/markdown", Size: 900}},
			Reference: events.Source{Name: fmt.Sprintf("reference/s-%d.md", i), Blob: &events.Blob{SHA256: liveDigest, MediaType: "text/markdown", Size: 1100}}}}
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: lj.size}, lj.tenant, lj.batch, id, 0, "", nil)
	sub.Time = lj.t0
	res, err := rulebook.Apply(rulebook.State{Now: lj.t0}, rulebook.Input{Event: sub, Link: sub.ID + ":" + liveDigest})
	if err != nil || res.Job == nil {
		tb.Fatalf("submit %s: %v", id, err)
	}
	return res.Job, &sub.Envelope
}

// decided is job i decided in round r's way: compared (a winner by the round, a judge,
// a confidence, a latency), blocked, or waiting for a person.
func (lj liveJobs) decided(tb testing.TB, i, r int) *records.Job {
	tb.Helper()
	j, env := lj.submit(tb, i)
	id := j.ACID
	var in events.Event
	switch (i + r) % 11 {
	case 0:
		in = events.New(&events.GatesFailed{Kind: events.KindAB, ACID: id, Blocked: fmt.Sprintf("ours artifact: unsupported (round %d)", r)}, lj.tenant, lj.batch, id, 0, "", env)
	default:
		vote := events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: []string{"gpt-4o-mini", "gpt-4.1", "o3"}[(i+r)%3], PromptTokens: 900 + (i+r)%400,
			CompletionTokens: 40 + i%60, LatencyMillis: int64(700 + (i*7+r)%2300), Cached: (i+r)%5 == 0},
			Order: "AB", Status: events.VoteOK, RawWinner: []string{"A", "B", "tie"}[(i+r)%3], Confidence: float64(50+(i+r)%50) / 100,
			BiggestGap: fmt.Sprintf("step %d of the migration is missing (round %d)", i%13, r), Reasoning: "r"}
		in = events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{vote}}, lj.tenant, lj.batch, id, 0, "", env)
	}
	in.Time = lj.t0.Add(time.Duration(i) * time.Millisecond)
	done, err := rulebook.Apply(rulebook.State{Job: j, Now: in.Time}, rulebook.Input{Event: in, Link: in.ID + ":" + liveDigest})
	if err != nil || done.Job == nil {
		tb.Fatalf("decide %s: %v", id, err)
	}
	if (i+r)%97 == 0 {
		// The console shows the rows awaiting a person, whatever their kind.
		done.Job.Status = events.StatusAwaitingSpotcheck
	}
	return done.Job
}

// putJobs writes the records, a few at a time, and returns the last revision written.
func putJobs(tb testing.TB, b bus.Buckets, jobs []*records.Job) uint64 {
	tb.Helper()
	var mu sync.Mutex
	var last uint64
	var wg sync.WaitGroup
	work := make(chan *records.Job)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				data, err := json.Marshal(j)
				if err != nil {
					tb.Error(err)
					continue
				}
				rev, err := b.Jobs.Put(context.Background(), j.Key(), data)
				if err != nil {
					tb.Error(err)
					continue
				}
				mu.Lock()
				last = max(last, rev)
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	return last
}

func putHeader(tb testing.TB, b bus.Buckets, h records.Batch) {
	tb.Helper()
	data, _ := json.Marshal(h)
	if _, err := b.Batches.Put(context.Background(), records.BatchKey(h.Tenant, h.Batch), data); err != nil {
		tb.Fatal(err)
	}
}

func serve(tb testing.TB, h http.Handler, path string) string {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		tb.Fatalf("%s: %d %s", path, rec.Code, body)
	}
	return string(body)
}

// fullLoad is a console that reads a running batch's every record on each page, as the
// console did before followers: what a follower's pages must equal.
func fullLoad(cfg Config) *server {
	s := newServer(cfg)
	s.live.bucket = ""
	return s
}

// waitApplied waits until the batch's follower has applied the writes up to rev (a
// console that follows nothing, the one before followers, waits for nothing).
func waitApplied(t *testing.T, s *server, tenant, batch string, rev uint64) *follower {
	t.Helper()
	var f *follower
	if s.live.bucket == "" {
		return nil
	}
	poll.Until(t, 30*time.Second, "the follower applies the writes", func() (bool, string) {
		s.live.mu.Lock()
		f = s.live.by[tenant+"/"+batch]
		s.live.mu.Unlock()
		if f == nil {
			return false, "no follower"
		}
		got := f.applied()
		return got >= rev, fmt.Sprintf("applied %d of %d", got, rev)
	})
	return f
}

// TestRunningBatchFollowed: a running batch's pages cost what changed, not the batch's
// size. A 20,000-job batch is read once, by one follower that two viewers share; after
// each round of writes (jobs decided, decided again, new jobs recorded) the follower has
// read exactly the records written, a refresh of every page reads none, and each page
// (in batch order, deep, sorted, filtered, searched, the CSV export in both orders, the
// comparison, the API) equals a full read of the records. A batch bigger than the
// cache's limit keeps most chunks encoded, and its pages are the same. Once the batch
// completes its follower stops and its pages are still a full read's.
func TestRunningBatchFollowed(t *testing.T) {
	buckets := natstest.Buckets(t, bus.Config{})
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Buckets: buckets, Store: store, Logger: slog.New(slog.DiscardHandler)}
	const tenant = "team-a"
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	// The comparison's other batch: completed, read once from its records.
	prev := liveJobs{tenant: tenant, batch: "before", size: 3000, t0: t0.Add(-time.Hour)}
	var jobs []*records.Job
	for i := range prev.size {
		jobs = append(jobs, prev.decided(t, i, 0))
	}
	putJobs(t, buckets, jobs)
	comp := records.Completion{At: t0, By: "AC-0", Summary: events.BatchCompleted{Total: prev.size, Compared: prev.size}}
	putHeader(t, buckets, records.Batch{Tenant: tenant, Batch: prev.batch, Size: prev.size, CreatedAt: prev.t0, Source: "b.yaml", Completion: &comp})

	for _, tc := range []struct {
		name        string
		n, recorded int
		limit       int
		rounds, per int
		wantSpilled bool
		batchID     string
		deepPage    string
	}{
		{name: "decoded", n: 20_000, recorded: 19_500, limit: maxCachedEntries, rounds: 4, per: 300, batchID: "running", deepPage: "?page=190"},
		{name: "spilled", n: 8_000, recorded: 7_700, limit: 2_000, rounds: 3, per: 300, wantSpilled: true, batchID: "running-big", deepPage: "?page=75"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer SetRowsLimit(tc.limit)()
			if tc.wantSpilled {
				old := hotChunks
				hotChunks = 2
				defer func() { hotChunks = old }()
			}
			lj := liveJobs{tenant: tenant, batch: tc.batchID, size: tc.n, t0: t0}
			putHeader(t, buckets, records.Batch{Tenant: tenant, Batch: lj.batch, Size: tc.n, CreatedAt: t0, Source: "b.yaml"})
			jobs := make([]*records.Job, 0, tc.recorded)
			for i := range tc.recorded {
				if i%3 == 0 {
					jobs = append(jobs, lj.decided(t, i, 0))
				} else {
					jobs = append(jobs, lj.submitted(t, i))
				}
			}
			rev := putJobs(t, buckets, jobs)

			s := newServer(cfg)
			base := batchHref(tenant, lj.batch)
			queries := []string{base, base + "?page=2", base + tc.deepPage, base + "?sort=confidence&dir=desc&page=3",
				base + "?outcome=reference&page=2", base + "?status=blocked", base + "?q=step+3+of", base + "?judge=openai/o3&sort=ac",
				base + "/export.csv", base + "/export.csv?sort=confidence&dir=desc&outcome=ours", base + "/compare?with=before&page=2",
				"/api" + base + "?sort=outcome&page=4"}
			// Warm: the follower's first read, and the other batch's.
			serve(t, s.handler, base)
			serve(t, s.handler, base+"/compare?with=before")
			if got := s.recordsRead.Load(); got != int64(tc.recorded+prev.size) {
				t.Fatalf("the first pages read %d records, want the batch's %d and the other batch's %d, once", got, tc.recorded, prev.size)
			}
			waitApplied(t, s, tenant, lj.batch, rev)
			written := tc.recorded
			r := rand.New(rand.NewPCG(7, uint64(tc.n)))
			for round := 1; round <= tc.rounds; round++ {
				// A round of writes: jobs decided (or decided again), and new jobs recorded.
				// Each job once a round: a key written twice in a row may be read once, its
				// first value gone from the stream (one revision a key) before it is read.
				var batch []*records.Job
				for _, i := range r.Perm(written)[:tc.per-tc.per/3] {
					batch = append(batch, lj.decided(t, i, round))
				}
				for range tc.per / 3 {
					batch = append(batch, lj.submitted(t, written))
					written++
				}
				before := s.recordsRead.Load()
				rev := putJobs(t, buckets, batch)
				f := waitApplied(t, s, tenant, lj.batch, rev)
				if got := s.recordsRead.Load() - before; got != int64(len(batch)) {
					t.Fatalf("round %d: the follower read %d records for %d written", round, got, len(batch))
				}
				// Two viewers, each refreshing every page: nothing read, one follower.
				before = s.recordsRead.Load()
				pages := make([][]string, 2)
				var wg sync.WaitGroup
				for v := range pages {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for _, q := range queries {
							pages[v] = append(pages[v], serve(t, s.handler, q))
						}
					}()
				}
				wg.Wait()
				if got := s.recordsRead.Load() - before; got != 0 {
					t.Fatalf("round %d: a refresh of %d pages by two viewers read %d records, want none", round, 2*len(queries), got)
				}
				if n := s.live.count(); n != 1 {
					t.Fatalf("round %d: %d followers, want one for both viewers", round, n)
				}
				info, err := buckets.JS.Stream(context.Background(), "KV_"+s.live.bucket)
				if err != nil {
					t.Fatal(err)
				}
				if c := info.CachedInfo().State.Consumers; c != 1 {
					t.Fatalf("round %d: the jobs stream has %d consumers, want the follower's one", round, c)
				}
				fresh := fullLoad(cfg)
				for i, q := range queries {
					want := serve(t, fresh.handler, q)
					for v := range pages {
						if pages[v][i] != want {
							t.Fatalf("round %d, viewer %d: %s differs from a full read of the records:\n%s", round, v, q, firstDiff(pages[v][i], want))
						}
					}
				}
				if fresh.recordsRead.Load() < int64(written) {
					t.Fatalf("the full read read %d records of %d", fresh.recordsRead.Load(), written)
				}
				if f == nil {
					t.Fatal("no follower")
				}
				f.mu.Lock()
				spilled := 0
				for _, c := range f.chunks {
					if c != nil && c.stored != nil {
						spilled++
					}
				}
				decoded := f.decoded
				f.mu.Unlock()
				if tc.wantSpilled && (spilled == 0 || decoded > 2*hotChunks) {
					t.Fatalf("round %d: %d chunks encoded, %d decoded, want at most %d decoded", round, spilled, decoded, 2*hotChunks)
				}
				if !tc.wantSpilled && spilled != 0 {
					t.Fatalf("round %d: %d chunks encoded in a batch that fits the cache", round, spilled)
				}
				// What the follower holds counts against the cache's limit.
				w := s.live.weight()
				if !tc.wantSpilled && w != written || tc.wantSpilled && w > written/4 {
					t.Fatalf("round %d: the follower weighs %d entries of %d", round, w, written)
				}
				t.Logf("round %d: %d records written and read; %d pages refreshed twice, none read; %d chunks encoded", round, len(batch), len(queries), spilled)
			}

			// The batch completes: its follower stops, its pages are a full read's.
			comp := records.Completion{At: t0.Add(time.Hour), By: "AC-1", Summary: events.BatchCompleted{Total: written, Compared: written}}
			putHeader(t, buckets, records.Batch{Tenant: tenant, Batch: lj.batch, Size: tc.n, CreatedAt: t0, Source: "b.yaml", Completion: &comp})
			fresh := fullLoad(cfg)
			for _, q := range queries[:4] {
				if got, want := serve(t, s.handler, q), serve(t, fresh.handler, q); got != want {
					t.Fatalf("completed: %s differs from a full read:\n%s", q, firstDiff(got, want))
				}
			}
			if n := s.live.count(); n != 0 {
				t.Fatalf("%d followers after the batch completed, want none", n)
			}
		})
	}
}

// TestFollowerFailsToFullRead: a follower that cannot follow (here a job record deleted,
// which a position cannot take back) says why in the log and stops; the batch's pages
// read every record again, and are a full read's, never the follower's stale copy.
func TestFollowerFailsToFullRead(t *testing.T) {
	buckets := natstest.Buckets(t, bus.Config{})
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	cfg := Config{Buckets: buckets, Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	lj := liveJobs{tenant: "team-a", batch: "doomed", size: 2000, t0: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	putHeader(t, buckets, records.Batch{Tenant: lj.tenant, Batch: lj.batch, Size: lj.size, CreatedAt: lj.t0})
	var jobs []*records.Job
	for i := range lj.size {
		jobs = append(jobs, lj.decided(t, i, 0))
	}
	rev := putJobs(t, buckets, jobs)
	s := newServer(cfg)
	base := batchHref(lj.tenant, lj.batch)
	serve(t, s.handler, base)
	waitApplied(t, s, lj.tenant, lj.batch, rev)
	if err := buckets.Jobs.Delete(context.Background(), records.JobKey(lj.tenant, lj.batch, "AC-7")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the follower gives up", func() (bool, string) {
		return s.live.count() == 0, logs.String()
	})
	if !strings.Contains(logs.String(), "following a running batch failed") || !strings.Contains(logs.String(), "AC-7 was deleted") {
		t.Fatalf("the log does not say why the follower stopped:\n%s", logs.String())
	}
	before := s.recordsRead.Load()
	got := serve(t, s.handler, base+"?page=1")
	if read := s.recordsRead.Load() - before; read != int64(lj.size-1) {
		t.Fatalf("the page after the follower failed read %d records, want every one (%d)", read, lj.size-1)
	}
	if want := serve(t, fullLoad(cfg).handler, base+"?page=1"); got != want {
		t.Fatalf("the page after the follower failed is not a full read's:\n%s", firstDiff(got, want))
	}
	if strings.Contains(got, ">AC-7<") {
		t.Fatal("the page shows the deleted job")
	}
}

// TestFollowerSurvivesItsConsumerLost: a follower whose consumer is deleted on the server
// (a restart, an operator's cleanup) gets another from the last record it read on: the
// writes since are read once each, none missed, and its pages are a full read's.
func TestFollowerSurvivesItsConsumerLost(t *testing.T) {
	buckets := natstest.Buckets(t, bus.Config{})
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	cfg := Config{Buckets: buckets, Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	lj := liveJobs{tenant: "team-a", batch: "lost", size: 2000, t0: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	putHeader(t, buckets, records.Batch{Tenant: lj.tenant, Batch: lj.batch, Size: lj.size, CreatedAt: lj.t0})
	var jobs []*records.Job
	for i := range lj.size {
		jobs = append(jobs, lj.submitted(t, i))
	}
	rev := putJobs(t, buckets, jobs)
	s := newServer(cfg)
	base := batchHref(lj.tenant, lj.batch)
	serve(t, s.handler, base)
	waitApplied(t, s, lj.tenant, lj.batch, rev)
	ctx := context.Background()
	st, err := buckets.JS.Stream(ctx, "KV_"+s.live.bucket)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for name := range st.ConsumerNames(ctx).Name() {
		if err := st.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if deleted != 1 {
		t.Fatalf("deleted %d consumers, want the follower's one", deleted)
	}
	before := s.recordsRead.Load()
	for round := 1; round <= 3; round++ {
		jobs = jobs[:0]
		for i := range 50 {
			jobs = append(jobs, lj.decided(t, round*50+i, round))
		}
		waitApplied(t, s, lj.tenant, lj.batch, putJobs(t, buckets, jobs))
	}
	if got := s.recordsRead.Load() - before; got != 150 {
		t.Fatalf("the follower read %d records for 150 written after its consumer was lost", got)
	}
	for _, q := range []string{base, base + "?sort=outcome", base + "/export.csv"} {
		if got, want := serve(t, s.handler, q), serve(t, fullLoad(cfg).handler, q); got != want {
			t.Fatalf("%s after the consumer was lost is not a full read's:\n%s", q, firstDiff(got, want))
		}
	}
	if strings.Contains(logs.String(), "following a running batch failed") {
		t.Fatalf("a lost consumer failed the follower:\n%s", logs.String())
	}
}

// firstDiff shows where two pages part.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-200, 0)
	return fmt.Sprintf("got  ...%s\nwant ...%s", a[from:min(i+200, len(a))], b[from:min(i+200, len(b))])
}

// BenchmarkRunningBatchRefresh: a refresh of a running 20,000-job batch's first page
// after 100 of its records were written, with the console before followers (every record
// read again: reload) and with a follower (the written records only: follow; follow-
// spilled with the cache's limit at 2,000 entries, so most chunks are kept encoded).
// records/refresh is what one refresh and the writes before it cost in records read and
// decoded; the time is the refresh's alone, the writes and their delivery stopped out.
//
//	go test ./internal/console -run '^$' -bench RunningBatchRefresh -benchtime 50x
func BenchmarkRunningBatchRefresh(b *testing.B) {
	buckets := natstest.Buckets(b, bus.Config{})
	store, err := fileblob.New(b.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Buckets: buckets, Store: store, Logger: slog.New(slog.DiscardHandler)}
	const n, per = 20_000, 100
	lj := liveJobs{tenant: "team-a", batch: "running", size: n, t0: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	putHeader(b, buckets, records.Batch{Tenant: lj.tenant, Batch: lj.batch, Size: n, CreatedAt: lj.t0})
	jobs := make([]*records.Job, 0, n)
	for i := range n {
		jobs = append(jobs, lj.submitted(b, i))
	}
	putJobs(b, buckets, jobs)
	path := batchHref(lj.tenant, lj.batch)
	r := rand.New(rand.NewPCG(1, 2))
	round := 0
	// write decides per random jobs, each once (TestRunningBatchFollowed), as a running
	// batch's judges do.
	write := func() uint64 {
		round++
		batch := make([]*records.Job, 0, per)
		for _, i := range r.Perm(n)[:per] {
			batch = append(batch, lj.decided(b, i, round))
		}
		return putJobs(b, buckets, batch)
	}
	b.Run("reload", func(b *testing.B) {
		read := int64(0)
		for b.Loop() {
			b.StopTimer()
			write()
			// The cache's two seconds are over by the next refresh (every 3 s).
			s := fullLoad(cfg)
			b.StartTimer()
			serve(b, s.handler, path)
			read += s.recordsRead.Load()
		}
		b.ReportMetric(float64(read)/float64(b.N), "records/refresh")
	})
	for _, bc := range []struct {
		name  string
		limit int
	}{{"follow", maxCachedEntries}, {"follow-spilled", 2000}} {
		b.Run(bc.name, func(b *testing.B) {
			defer SetRowsLimit(bc.limit)()
			s := newServer(cfg)
			serve(b, s.handler, path)
			defer s.live.stop(lj.tenant, lj.batch)
			start := s.recordsRead.Load()
			for b.Loop() {
				b.StopTimer()
				rev := write()
				for {
					s.live.mu.Lock()
					f := s.live.by[lj.tenant+"/"+lj.batch]
					s.live.mu.Unlock()
					if f == nil {
						b.Fatal("no follower")
					}
					if f.applied() >= rev {
						break
					}
					time.Sleep(time.Millisecond)
				}
				b.StartTimer()
				serve(b, s.handler, path)
			}
			b.ReportMetric(float64(s.recordsRead.Load()-start)/float64(b.N), "records/refresh")
			s.live.mu.Lock()
			f := s.live.by[lj.tenant+"/"+lj.batch]
			s.live.mu.Unlock()
			f.mu.Lock()
			stored, entries := 0, 0
			for _, c := range f.chunks {
				if c != nil && c.stored != nil {
					stored, entries = stored+len(c.stored), entries+c.n
				}
			}
			f.mu.Unlock()
			if entries > 0 {
				b.ReportMetric(float64(stored)/float64(entries), "encoded-B/entry")
				b.ReportMetric(float64(entries), "entries-encoded")
			}
		})
	}
}
