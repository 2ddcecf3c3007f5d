package batch

import (
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// sameAsTree fails t unless Parse (entry by entry where the file allows) and parseTree
// (the whole tree) give the same batch and the same error.
func sameAsTree(t *testing.T, data []byte) {
	t.Helper()
	b1, err1 := Parse("dir/batch.yaml", data)
	b2, err2 := parseTree("dir/batch.yaml", data)
	if fmt.Sprint(err1) != fmt.Sprint(err2) {
		t.Fatalf("%q:\nentry by entry: %v\nas one tree:    %v", data, err1, err2)
	}
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("%q:\nentry by entry: %+v\nas one tree:    %+v", data, b1, b2)
	}
}

// streamCases are files read entry by entry (split true) or parsed whole because the
// scan cannot be sure of their entries (split false); either way the result is the tree's.
var streamCases = []struct {
	name, data string
	split      bool
}{
	{"valid", validBatch, true},
	{"entries at the key's indent", "version: 1\nacs:\n- id: AC-1\n  criterion: c\n- id: AC-2\n  criterion: d\n", true},
	{"keys after the entries", "version: 1\nacs:\n  - id: AC-1\n    criterion: c\n# between\nname: after\njudges: [a]\n", true},
	{"comments and blank lines", "version: 1\nacs: # the list\n\n  # first\n  - id: AC-1\n\n# out of line\n  - id: AC-2 # two\n\n", true},
	{"crlf", "version: 1\r\nacs:\r\n  - id: AC-1\r\n    criterion: c\r\n  - id: AC-2\r\n", true},
	{"document markers", "---\nversion: 1\nacs:\n  - id: AC-1\n...\n", true},
	{"a second document", "version: 1\nacs:\n  - id: AC-1\n---\nacs:\n  - id: AC-2\n", true},
	{"block scalar holding entry-like lines", "version: 1\nacs:\n  - id: AC-1\n    criterion: |\n      - id: AC-9\n      text\n  - id: AC-2\n", true},
	{"broken entries cost themselves", "version: 1\nacs:\n  - id: AC-1\n    criterian: c\n  - 12\n  - id: AC-1\n  - id: AC-3\n    judges: {a: 1}\n  - id: AC-4\n    ours: a\n    ours: b\n  - id: AC-5\n    ? [x]\n    : y\n", true},
	{"alias inside one entry", "version: 1\nacs:\n  - id: AC-1\n    judges: &j [a]\n    ladder: *j\n  - id: AC-2\n", true},
	{"header problem", "version: 1\nnmae: x\nacs:\n  - id: AC-1\n", true},
	{"header problem and a broken entry", "version: 1\nnmae: x\nacs:\n  - id: AC-1\n  - id: \"AC-2\n", false},
	{"repeated acs", "version: 1\nacs:\n  - id: AC-1\nacs:\n  - id: AC-2\n", true},
	{"no usable entry", "version: 1\nacs:\n  - id: \"\"\n  - 7\n", true},
	{"quoted scalar over an entry-like line", "version: 1\nacs:\n  - id: AC-1\n    criterion: \"one\n  - id: AC-9\n    two\"\n  - id: AC-2\n", false},
	{"flow collection over lines", "version: 1\nacs:\n  - id: AC-1\n    judges: [a,\n  - b]\n", false},
	{"alias to another entry of its group", "version: 1\nacs:\n  - id: AC-1\n    judges: &j [a]\n  - id: AC-2\n    judges: *j\n", true},
	{"alias to another group's entry", "version: 1\nacs:\n  - id: AC-0\n    judges: &j [a]\n" + strings.Repeat("  - id: AC-x\n", entryGroup) + "  - id: AC-2\n    judges: *j\n", false},
	{"more entries than a group", "version: 1\nacs:\n" + strings.Repeat("  - id: AC-x\n    criterion: |\n      - id: AC-y\n", 2*entryGroup+3), true},
	{"anchor in the header", "j: &j [a]\nversion: 1\nacs:\n  - id: AC-1\n    judges: *j\n", false},
	{"syntax error in an entry", "version: 1\nacs:\n  - id: AC-1\n  - id: [\n", false},
	{"less indented line after the entries", "version: 1\nacs:\n    - id: AC-1\n  name: x\n", false},
	{"flow list", "version: 1\nacs: [{id: AC-1}, {id: AC-2}]\n", false},
	{"json", `{"version": 1, "acs": [{"id": "AC-1"}]}`, false},
	{"acs inside a quoted header value", "name: \"x\nacs:\n  - id: AC-1\n  y\"\nversion: 1\nacs:\n  - id: AC-2\n", false},
	{"indented top level", "  version: 1\n  acs:\n  - id: AC-1\n", true},
	{"empty acs", "version: 1\nacs:\n", false},
	{"tab after the dash", "version: 1\nacs:\n  -\tid: AC-1\n", false},
}

// TestStreamedIsTheTree: a file read entry by entry gives what the whole tree gives,
// errors included, and the usual layouts are read entry by entry.
func TestStreamedIsTheTree(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			sameAsTree(t, []byte(tc.data))
			sp, ok := splitACs([]byte(tc.data))
			if ok {
				_, _, ok = parseSplit("dir/batch.yaml", []byte(tc.data), sp)
			}
			if ok != tc.split {
				t.Errorf("read entry by entry: %v, want %v", ok, tc.split)
			}
		})
	}
}

// FuzzParseStreamedIsTheTree: whatever the file, reading it entry by entry gives the
// whole tree's batch and error.
func FuzzParseStreamedIsTheTree(f *testing.F) {
	for _, tc := range streamCases {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsTree(t, data)
	})
}

// TestParseRefusesTooManyEntriesByCount: a list over MaxACs is refused naming the limit
// and the count, before any entry is read: entries that could not be parsed do not
// change the answer.
func TestParseRefusesTooManyEntriesByCount(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("version: 1\nacs:\n")
	for range MaxACs + 1 {
		sb.WriteString("- [\n")
	}
	_, err := Parse("batch.yaml", []byte(sb.String()))
	want := fmt.Sprintf("batch.yaml:3: acs: %d entries; at most %d per batch", MaxACs+1, MaxACs)
	if err == nil || err.Error() != want {
		t.Fatalf("Parse = %v, want %q", err, want)
	}
}

// BenchmarkParseMemory measures the heap a 100,000-entry parse holds at its peak (sampled
// every 50 µs; the collector runs as often as GOGC lets it) per AC, read entry by entry
// and as one tree, with what the parsed ACs themselves hold at the end.
func BenchmarkParseMemory(b *testing.B) {
	const n = 100_000
	data := benchBatch(n)
	for _, bc := range []struct {
		name  string
		parse func(string, []byte) (*Batch, error)
	}{{"entry-by-entry", Parse}, {"tree", parseTree}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var peak, end uint64
			for b.Loop() {
				runtime.GC()
				base := heapInUse()
				stop, done := make(chan struct{}), make(chan uint64)
				go func() {
					var top uint64
					for {
						if h := heapInUse(); h > top {
							top = h
						}
						select {
						case <-stop:
							done <- top
							return
						case <-time.After(50 * time.Microsecond):
						}
					}
				}()
				bt, err := bc.parse("bench/batch.yaml", data)
				close(stop)
				top := <-done
				if err != nil || len(bt.ACs) != n {
					b.Fatalf("Parse: %v", err)
				}
				runtime.GC()
				peak = max(peak, top-base)
				end = heapInUse() - base
				runtime.KeepAlive(bt)
			}
			b.ReportMetric(float64(peak)/n, "peak-B/AC")
			b.ReportMetric(float64(end)/n, "kept-B/AC")
		})
	}
}

// heapInUse is the bytes of live and not yet swept heap objects.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
