package batch_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/batch"
)

// maxHeldPerAC bounds the live heap a parsed batch keeps per AC (issue 29, item 5): the
// batch is held for the whole of a submission, so at 1,000,000 ACs every byte here is a
// megabyte of the run's peak. A bench AC kept 316 bytes (a 232-byte AC, its 16-byte ab
// part and a string allocation per field) before the fields few entries set moved behind
// one pointer and the batch interned its repeated strings; it keeps 212 now.
const maxHeldPerAC = 240

// benchBatch is a batch of n ab ACs as `tribunal bench` writes it (writeBenchFiles).
func benchBatch(n int) []byte {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: bench\nacs:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: generated\n    ours: %d/ours-%d.md\n    reference: %d/ref-%d.md\n", i, i%100, i, i%100, i)
	}
	return []byte(sb.String())
}

// liveHeap is the heap in use after a full collection.
func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}

// TestHeldBatchPerAC: a parsed 200,000-AC bench batch keeps under maxHeldPerAC bytes of
// live heap per AC once the file and the parser's trees are gone.
func TestHeldBatchPerAC(t *testing.T) {
	const n = 200_000
	before := liveHeap()
	data := benchBatch(n)
	b, err := batch.Parse("batch.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	data = nil // the file is read and let go before the submission
	after := liveHeap()
	if len(b.ACs) != n {
		t.Fatalf("%d ACs, want %d", len(b.ACs), n)
	}
	perAC := (after - before) / n
	t.Logf("parsed %d ACs: %.1f MB live, %.0f bytes an AC", n, (after-before)/1e6, perAC)
	if perAC > maxHeldPerAC {
		t.Errorf("a parsed batch keeps %.0f bytes an AC, over %d", perAC, maxHeldPerAC)
	}
	runtime.KeepAlive(b)
}
