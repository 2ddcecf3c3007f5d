package index

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
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

// TestBuilderHoldsNoStrings: a builder's entries are spilled with their strings inline,
// so 200,000 entries, each with its own AC id and criterion (about 26 MB of strings),
// leave the builder holding its sorter's buffer (8 MiB) and not the strings; they
// interned into one table for the batch before (140 MB at 1,000,000 in the cluster's
// aggregator). The index written is the one each chunk's own encoder makes.
func TestBuilderHoldsNoStrings(t *testing.T) {
	const n = 200_000
	criterion := func(i int) string { return fmt.Sprintf("criterion %d: %0100d", i, i) }
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	b := NewBuilder()
	defer b.Close()
	for i := range n {
		b.Add(Entry{Index: n - 1 - i, Criterion: criterion(n - 1 - i), Row: kind.Row{ACID: fmt.Sprintf("AC-%d", n-1-i), Kind: "ab", Status: "compared"}})
	}
	held := int64(heap()) - int64(before)
	if held > 12<<20 {
		t.Fatalf("the builder holds %d bytes after %d entries with their own strings, want at most 12 MiB", held, n)
	}
	t.Logf("%d entries: the builder holds %d bytes", n, held)

	var out bytes.Buffer
	if err := b.Write(&out); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for c := range r.chunks {
		ch := &r.chunks[c]
		zr, err := gzip.NewReader(io.NewSectionReader(r.r, ch.off, ch.size))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		// The chunk as its own encoder writes it, entry by entry.
		e := newEncoder()
		for i := ch.first; i < ch.first+ch.n; i++ {
			e.entry(&Entry{Index: i, Criterion: criterion(i), Row: kind.Row{ACID: fmt.Sprintf("AC-%d", i), Kind: "ab", Status: "compared"}})
		}
		var want bytes.Buffer
		if err := e.writeTo(&want, ch.n, func(fn func([]byte) error) error { return fn(e.body.Bytes()) }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("chunk %d (entries %d-%d) is not the one its encoder writes", c, ch.first, ch.first+ch.n-1)
		}
	}
}

// TestSpilledEntryCorrupt: a spilled entry whose inline string runs past its end, or
// with bytes after it, fails the write with a reason; it does not read past its bytes.
func TestSpilledEntryCorrupt(t *testing.T) {
	t.Parallel()
	e := &encoder{inline: true}
	e.entry(&Entry{Index: 1, Row: kind.Row{ACID: "AC-1"}})
	good := bytes.Clone(e.body.Bytes())
	for name, enc := range map[string][]byte{
		"string past the end": good[:3],
		"bytes after":         append(bytes.Clone(good), 7),
	} {
		err := writeChunked(io.Discard, 1, func(fn func([]byte) error) error { return fn(enc) })
		if err == nil || !strings.Contains(err.Error(), "a spilled entry") {
			t.Errorf("%s: %v, want the spilled entry named", name, err)
		}
	}
}
