package console_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// streamedACs is the size of the synthetic batches the memory tests export and compare:
// decoded whole, one is about 80 MB of entries.
const streamedACs = 100_000

// maxStreamedPerEntry bounds the heap a CSV export or a comparison may grow by, per entry
// of the batch, over what the console held before it (the stored index): a chunk of
// entries, the sorter's buffer and the writer's are a few MiB whatever the batch. Holding
// the batch's entries decoded is about 800 bytes an entry.
const maxStreamedPerEntry = 60

// streamStore is a console's buckets and blob store, for batches stored as the
// aggregator stores them: a header whose completion names the chunked index.
type streamStore struct {
	buckets bus.Buckets
	store   blob.Store
}

func newStreamStore(t *testing.T) streamStore {
	t.Helper()
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return streamStore{buckets: natstest.Buckets(t, bus.Config{}), store: store}
}

// put stores a completed batch whose index holds n entries, entry(i) at position i.
func (s streamStore) put(t *testing.T, tenant, batch string, n int, entry func(i int) index.Entry) {
	t.Helper()
	ctx := context.Background()
	b := index.NewBuilder()
	defer b.Close()
	for i := range n {
		b.Add(entry(i))
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err := blob.PutBytes(ctx, s.store, tenant, data, index.MediaType)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	comp := records.Completion{At: t0, By: "AC-1", Summary: events.BatchCompleted{Total: n, Compared: n},
		Index: &events.Blob{SHA256: a.Ref.SHA256, MediaType: index.MediaType, Size: a.Size}}
	header, _ := json.Marshal(records.Batch{Tenant: tenant, Batch: batch, Size: n, CreatedAt: t0, Completion: &comp})
	if _, err := s.buckets.Batches.Put(ctx, records.BatchKey(tenant, batch), header); err != nil {
		t.Fatal(err)
	}
}

// streamEntry is an ab entry as a batch's index holds one: its own id, gap and
// criterion, a judge call.
func streamEntry(i int) index.Entry {
	conf := float64(i%100) / 100
	return index.Entry{Index: i, Criterion: fmt.Sprintf("Screen %d explains what changed and what to do next.", i),
		Row: kind.Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", Status: "compared", Winner: []string{"ours", "reference", "tie"}[i%3],
			Confidence: &conf, Judge: "openai/m", BiggestGap: fmt.Sprintf("Slot A leaves out step %d of the migration.", i)},
		Calls: []records.Call{{Judge: "openai/m", Label: "AB", Status: events.VoteOK, PromptTokens: 900 + i%400, CompletionTokens: 40}}}
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heapWatch keeps the most live heap seen, sampled each time step entries are decoded
// or step bytes written (every read of the index's entries at once, whatever its size).
type heapWatch struct {
	step, entries, bytes int
	peak                 int64
}

func (h *heapWatch) decoded(entries int) {
	if h.entries += entries; h.entries >= h.step {
		h.entries = 0
		h.peak = max(h.peak, liveHeap())
	}
}

func (h *heapWatch) wrote(bytes int) {
	if h.bytes += bytes; h.bytes >= 32*h.step {
		h.bytes = 0
		h.peak = max(h.peak, liveHeap())
	}
}

// sampledWriter is a response that keeps only its last bytes and a count of its lines,
// and samples the heap as it is written.
type sampledWriter struct {
	header http.Header
	code   int
	lines  int
	head   bytes.Buffer
	watch  *heapWatch
}

func (w *sampledWriter) Header() http.Header  { return w.header }
func (w *sampledWriter) WriteHeader(code int) { w.code = code }
func (w *sampledWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.head.Len() < 1<<20 {
		w.head.Write(p)
	}
	w.lines += bytes.Count(p, []byte("\n"))
	w.watch.wrote(len(p))
	return len(p), nil
}

// TestCSVExportStreams: the CSV export of a 100,000-AC batch reads its index a chunk at a
// time and writes each chunk's rows before reading the next (batch order), or spills the
// rows to be sorted (another order): either way the live heap grows by under
// maxStreamedPerEntry bytes an entry over what the console held before, where decoding the
// batch whole (as the export did) holds about 800. The rows are the filter's, in the
// sort's order.
func TestCSVExportStreams(t *testing.T) {
	defer func(b int) { spillsort.DefaultBuffer = b }(spillsort.DefaultBuffer)
	spillsort.DefaultBuffer = 1 << 20
	const tenant, batch, n = "team-a", "big", streamedACs
	s := newStreamStore(t)
	s.put(t, tenant, batch, n, streamEntry)
	watch := &heapWatch{step: 8 * index.ChunkSize}
	defer console.SetIndexRead(func(_ int64, entries int) { watch.decoded(entries) })()
	var h http.Handler
	get := func(query string) *sampledWriter {
		t.Helper()
		w := &sampledWriter{header: http.Header{}, watch: watch}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/t/"+tenant+"/b/"+batch+query, nil))
		if w.code != http.StatusOK {
			t.Fatalf("%s: %d %s", query, w.code, w.head.String())
		}
		return w
	}
	for _, tc := range []struct {
		query string
		rows  int
		first []string
	}{
		{"/export.csv", n, []string{"AC-0", "AC-1", "AC-2"}},
		{"/export.csv?outcome=reference", n / 3, []string{"AC-1", "AC-4", "AC-7"}},
		// By confidence down, then batch order: 0.99 is every hundredth AC from AC-99.
		{"/export.csv?sort=confidence&dir=desc&outcome=ours", (n + 2) / 3, []string{"AC-99", "AC-399", "AC-699"}},
	} {
		// A console that read the stored index (a page of the table decodes one chunk).
		h = console.New(console.Config{Buckets: s.buckets, Store: s.store})
		get("?page=20")
		base := liveHeap()
		watch.peak, watch.entries, watch.bytes = base, 0, 0
		w := get(tc.query)
		grown := watch.peak - base
		t.Logf("%s: %d lines, live heap grown %.1f MB at most (%.0f bytes an entry)", tc.query, w.lines, float64(grown)/1e6, float64(grown)/n)
		if grown > maxStreamedPerEntry*n {
			t.Errorf("%s: the live heap grew by %d bytes, over %d an entry of %d", tc.query, grown, maxStreamedPerEntry, n)
		}
		if w.lines != tc.rows+1 {
			t.Errorf("%s: %d lines, want %d rows and the header", tc.query, w.lines, tc.rows)
		}
		recs, err := csv.NewReader(bytes.NewReader(w.head.Bytes()[:bytes.LastIndexByte(w.head.Bytes(), '\n')+1])).ReadAll()
		if err != nil || len(recs) < 4 {
			t.Fatalf("%s: %v, %d records", tc.query, err, len(recs))
		}
		for i, id := range tc.first {
			if recs[1+i][1] != id {
				t.Errorf("%s: row %d is %s, want %s", tc.query, i+1, recs[1+i][1], id)
			}
		}
		if tc.query == "/export.csv" && recs[1][0] != strconv.Itoa(0) {
			t.Errorf("the first row's index %q", recs[1][0])
		}
	}
}

// TestCompareStreams: comparing two 100,000-AC batches walks both indexes a chunk at a
// time, side by side, and joins by id only the ACs not found near their position (here a
// thousand moved to the end of the rerun): the live heap grows by under
// maxStreamedPerEntry bytes an entry of the batches, where decoding both (as the page
// did) held about 800 each. The counts, the transitions and a page of the changes are
// verdicts.Compare's over the rows in memory.
func TestCompareStreams(t *testing.T) {
	defer func(b int) { spillsort.DefaultBuffer = b }(spillsort.DefaultBuffer)
	spillsort.DefaultBuffer = 1 << 20
	const tenant, n = "team-a", streamedACs
	s := newStreamStore(t)
	s.put(t, tenant, "before", n, streamEntry)
	// The rerun: AC-0 to AC-999 last, every thousandth from AC-500 gone, 50 new ACs,
	// every eleventh AC now a fix and every seventh's winner moved.
	var order []int
	for i := 1000; i < n; i++ {
		if i%1000 != 500 {
			order = append(order, i)
		}
	}
	for j := range 50 {
		order = append(order, -1-j)
	}
	for i := range 1000 {
		order = append(order, i)
	}
	afterEntry := func(pos int) index.Entry {
		i := order[pos]
		if i < 0 {
			e := streamEntry(n - 1 - i)
			e.ACID, e.Index = fmt.Sprintf("AC-new-%d", -1-i), pos
			return e
		}
		e := streamEntry(i)
		e.Index = pos
		if i%11 == 0 {
			e.Tag = "fix"
		}
		if i%7 == 0 {
			e.Winner = []string{"reference", "tie", "ours"}[i%3]
		}
		return e
	}
	s.put(t, tenant, "after", len(order), afterEntry)

	// What verdicts.Compare says of the rows, in memory (let go before the heap is watched).
	wantCounts, wantTransitions, wantPage, wantChanged := func() (verdicts.Counts, string, string, int) {
		var before, after []kind.Row
		for i := range n {
			before = append(before, streamEntry(i).Row)
		}
		for pos := range order {
			after = append(after, afterEntry(pos).Row)
		}
		cmp := verdicts.Compare(before, after)
		var changes, transitions []string
		seen := map[string]int{}
		var keys []string
		for _, e := range cmp.Entries {
			if e.Base == nil || e.New == nil || e.Change == verdicts.Unchanged && !e.Moved() {
				continue
			}
			changes = append(changes, e.ACID+":"+string(e.Change))
			if e.Change != verdicts.Unchanged {
				k := string(e.Base.Grade) + ">" + string(e.New.Grade)
				if seen[k] == 0 {
					keys = append(keys, k)
				}
				seen[k]++
			}
		}
		for _, k := range keys {
			transitions = append(transitions, fmt.Sprintf("%s:%d", k, seen[k]))
		}
		return cmp.Counts, strings.Join(transitions, " "), strings.Join(changes[200:300], " "), len(changes)
	}()

	watch := &heapWatch{step: 8 * index.ChunkSize}
	defer console.SetIndexRead(func(_ int64, entries int) { watch.decoded(entries) })()
	h := console.New(console.Config{Buckets: s.buckets, Store: s.store})
	get := func(path string) *sampledWriter {
		t.Helper()
		w := &sampledWriter{header: http.Header{}, watch: watch}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.code, w.head.String())
		}
		return w
	}
	// The console reads both stored indexes (a page of each table decodes one chunk).
	get("/t/" + tenant + "/b/after?page=20")
	get("/t/" + tenant + "/b/before?page=20")
	base := liveHeap()
	watch.peak, watch.entries, watch.bytes = base, 0, 0
	w := get("/api/t/" + tenant + "/b/after/compare?with=before&page=3")
	grown := watch.peak - base
	t.Logf("compared %d with %d ACs: live heap grown %.1f MB at most (%.0f bytes an entry)", len(order), n, float64(grown)/1e6, float64(grown)/(2*n))
	if grown > maxStreamedPerEntry*2*n {
		t.Errorf("the live heap grew by %d bytes, over %d an entry of %d", grown, maxStreamedPerEntry, 2*n)
	}
	var got struct {
		Counts      verdicts.Counts `json:"counts"`
		Transitions []struct {
			From, To string
			Count    int
		} `json:"transitions"`
		Changes []struct {
			ACID  string `json:"ac_id"`
			What  string `json:"what"`
			After struct {
				Href string `json:"href"`
			} `json:"after"`
		} `json:"changes"`
		Page  int `json:"page"`
		Pages int `json:"pages"`
	}
	if err := json.Unmarshal(w.head.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("counts %+v, transitions %s, %d changed", got.Counts, wantTransitions, wantChanged)
	if got.Counts != wantCounts {
		t.Errorf("counts %+v, want %+v", got.Counts, wantCounts)
	}
	var transitions, page []string
	for _, tr := range got.Transitions {
		transitions = append(transitions, fmt.Sprintf("%s>%s:%d", tr.From, tr.To, tr.Count))
	}
	for _, ch := range got.Changes {
		page = append(page, ch.ACID+":"+ch.What)
	}
	if s := strings.Join(transitions, " "); s != wantTransitions {
		t.Errorf("transitions %s, want %s", s, wantTransitions)
	}
	if s := strings.Join(page, " "); s != wantPage {
		t.Errorf("page 3 of the changes:\n%s\nwant\n%s", s, wantPage)
	}
	if got.Page != 3 || got.Pages != (wantChanged+99)/100 || got.Changes[0].After.Href != "/t/"+tenant+"/b/after/j/"+got.Changes[0].ACID {
		t.Errorf("page %d of %d (want of %d), first %+v", got.Page, got.Pages, (wantChanged+99)/100, got.Changes[0])
	}
}
