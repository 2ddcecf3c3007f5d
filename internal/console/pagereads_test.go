package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
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
)

// TestBatchPageReadsItsChunks: a completed batch's page reads its stored index a chunk
// at a time. The first page counts the charts and filters over every entry, a chunk at a
// time, and decodes the chunk it shows; a later page decodes only its own chunk (512
// entries of 5,000, a tenth of the index's bytes); a filtered view decodes every entry
// once, and the pages after it read nothing more. A batch too big for the console's
// cache is never decoded whole: its filtered and sorted views read it a chunk at a time
// each time, and the right rows; a page past the rows it may keep reads it twice, the
// second time for the page's own entries.
func TestBatchPageReadsItsChunks(t *testing.T) {
	ctx := context.Background()
	buckets := natstest.Buckets(t, bus.Config{})
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const tenant, batch, n = "team-a", "paged", 5000
	b := index.NewBuilder()
	for _, i := range rand.New(rand.NewPCG(5, 6)).Perm(n) {
		conf := float64(i%100) / 100
		b.Add(index.Entry{Index: i, Criterion: "c", Row: kind.Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", Status: "compared",
			Winner: []string{"ours", "reference", "tie"}[i%3], Confidence: &conf, Judge: "openai/m", BiggestGap: fmt.Sprintf("gap %d", i)}})
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err := blob.PutBytes(ctx, store, tenant, data, index.MediaType)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	comp := records.Completion{At: t0, By: "AC-1", Summary: events.BatchCompleted{Total: n, Compared: n, ExitCode: 1},
		Index: &events.Blob{SHA256: a.Ref.SHA256, MediaType: index.MediaType, Size: a.Size}}
	header, _ := json.Marshal(records.Batch{Tenant: tenant, Batch: batch, Size: n, CreatedAt: t0, Completion: &comp})
	if _, err := buckets.Batches.Put(ctx, records.BatchKey(tenant, batch), header); err != nil {
		t.Fatal(err)
	}
	type read struct {
		bytes   int64
		entries int
	}
	var reads []read
	defer console.SetIndexRead(func(b int64, e int) { reads = append(reads, read{b, e}) })()
	h := console.New(console.Config{Buckets: buckets, Store: store})
	get := func(query string) string {
		t.Helper()
		reads = nil
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/t/"+tenant+"/b/"+batch+query, nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", query, rec.Code, body)
		}
		return string(body)
	}

	first := get("")
	if len(reads) != 2 || reads[0].entries != n || reads[1].entries != index.ChunkSize {
		t.Fatalf("the first page read %+v, want every entry once (the charts) then one chunk", reads)
	}
	if !strings.Contains(first, ">AC-0<") || !strings.Contains(first, ">AC-99<") || strings.Contains(first, ">AC-100<") {
		t.Fatal("the first page does not show AC-0 to AC-99")
	}
	later := get("?page=20")
	if len(reads) != 1 || reads[0].entries != index.ChunkSize || reads[0].bytes > int64(len(data))/5 {
		t.Fatalf("page 20 read %+v of %d bytes, want one chunk", reads, len(data))
	}
	if !strings.Contains(later, ">AC-1900<") || !strings.Contains(later, ">AC-1999<") || strings.Contains(later, ">AC-2000<") {
		t.Fatal("page 20 does not show AC-1900 to AC-1999")
	}
	t.Logf("page 20: %d bytes of %d read, %d entries decoded", reads[0].bytes, len(data), reads[0].entries)
	get("?outcome=reference")
	if len(reads) != 1 || reads[0].entries != n {
		t.Fatalf("a filtered view read %+v, want every entry once", reads)
	}
	get("?page=30")
	if len(reads) != 0 {
		t.Fatalf("a page after every entry was decoded read %+v, want nothing", reads)
	}

	// A batch whose entries would not fit the cache is never decoded whole: a filtered
	// and sorted view reads it a chunk at a time each time, and keeps the page.
	defer console.SetRowsLimit(n / 2)()
	h = console.New(console.Config{Buckets: buckets, Store: store})
	get("")
	for range 2 {
		sorted := get("?outcome=reference&sort=confidence&dir=desc&page=2")
		if len(reads) != 1 || reads[0].entries != n {
			t.Fatalf("a filtered view of a batch too big to keep read %+v, want every entry once", reads)
		}
		// The reference rows (every third), by confidence down, then batch order.
		var want []int
		for i := 1; i < n; i += 3 {
			want = append(want, i)
		}
		sort.SliceStable(want, func(a, b int) bool { return want[a]%100 > want[b]%100 })
		for _, i := range []int{want[100], want[199]} {
			if !strings.Contains(sorted, fmt.Sprintf(">AC-%d<", i)) {
				t.Fatalf("page 2 of the reference rows by confidence lacks AC-%d", i)
			}
		}
		for _, i := range []int{want[99], want[200]} {
			if strings.Contains(sorted, fmt.Sprintf(">AC-%d<", i)) {
				t.Fatalf("page 2 of the reference rows by confidence shows AC-%d", i)
			}
		}
	}
	get("?page=20")
	if len(reads) != 1 || reads[0].entries != index.ChunkSize {
		t.Fatalf("page 20 after a filtered view of a batch too big to keep read %+v, want one chunk", reads)
	}

	// A page past the rows a view may keep (the last of a sorted 1,000,000-AC table would
	// keep them all) is found from the matching rows' order keys, spilled, and the batch
	// read again for the page's entries.
	defer console.SetKeptRows(1000)()
	var want []int
	for i := 1; i < n; i += 3 {
		want = append(want, i)
	}
	sort.SliceStable(want, func(a, b int) bool { return want[a]%100 > want[b]%100 })
	deep := get("?outcome=reference&sort=confidence&dir=desc&page=12")
	if len(reads) != 2 || reads[0].entries != n || reads[1].entries != n {
		t.Fatalf("page 12 of a sorted view of a batch too big to keep read %+v, want every entry twice", reads)
	}
	for _, i := range []int{want[1100], want[1150], want[1199]} {
		if !strings.Contains(deep, fmt.Sprintf(">AC-%d<", i)) {
			t.Fatalf("page 12 of the reference rows by confidence lacks AC-%d", i)
		}
	}
	for _, i := range []int{want[1099], want[1200]} {
		if strings.Contains(deep, fmt.Sprintf(">AC-%d<", i)) {
			t.Fatalf("page 12 of the reference rows by confidence shows AC-%d", i)
		}
	}
	if strings.Index(deep, fmt.Sprintf(">AC-%d<", want[1100])) > strings.Index(deep, fmt.Sprintf(">AC-%d<", want[1199])) {
		t.Fatal("page 12 is out of order")
	}
}
