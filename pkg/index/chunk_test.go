package index

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// TestPageReadsItsChunks: entries added in any order are stored in batch order, and a
// page of them reads and decodes the chunks it falls in, not the index: 100 entries of
// 5,000 from one chunk (two where the page straddles them); the whole index decodes as
// before.
func TestPageReadsItsChunks(t *testing.T) {
	t.Parallel()
	const n = 5000
	order := rand.New(rand.NewPCG(3, 4)).Perm(n)
	b := NewBuilder()
	for _, i := range order {
		b.Add(Entry{Index: i, Row: kind.Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", BiggestGap: fmt.Sprintf("gap %d", i%37)}})
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	all, err := Decode(data)
	if err != nil || len(all) != n {
		t.Fatalf("decoded %d entries, %v", len(all), err)
	}
	for i := range all {
		if all[i].Index != i || all[i].ACID != fmt.Sprintf("AC-%d", i) {
			t.Fatalf("entry %d is %+v", i, all[i].Row)
		}
	}
	for _, tc := range []struct{ from, chunks int }{{0, 1}, {1100, 1}, {1000, 2}, {4950, 1}} {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		head, _ := r.Read()
		page, err := r.Page(tc.from, tc.from+100)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(100, n-tc.from); len(page) != want || page[0].Index != tc.from {
			t.Fatalf("page at %d: %d entries from %d, want %d from %d", tc.from, len(page), page[0].Index, want, tc.from)
		}
		read, decoded := r.Read()
		if decoded > tc.chunks*ChunkSize || read-head > int64(len(data))/4 {
			t.Fatalf("page at %d: read %d bytes (%d of them the directory) of %d and decoded %d entries, want %d chunk(s)",
				tc.from, read, head, len(data), decoded, tc.chunks)
		}
		t.Logf("page at %d: %d bytes of %d read, %d entries decoded", tc.from, read, len(data), decoded)
	}
}

// BenchmarkPage reads a 100-entry page of a 100,000-entry index, the directory and one
// chunk, as the console's table does for a page in batch order.
func BenchmarkPage(b *testing.B) {
	const n = 100_000
	bl := NewBuilder()
	for i := range n {
		conf := float64(i%100) / 100
		bl.Add(Entry{Index: i, Criterion: fmt.Sprintf("criterion %d", i%977), Row: kind.Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", Status: "compared",
			Confidence: &conf, Judge: "openai/m", BiggestGap: fmt.Sprintf("gap %d", i%13)}})
	}
	data, err := bl.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Page(50_000, 50_100); err != nil {
			b.Fatal(err)
		}
	}
}
