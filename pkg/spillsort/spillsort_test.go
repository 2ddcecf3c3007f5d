package spillsort_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// TestSortsStablyAcrossRuns: records spilled to many runs, and some still held, come out
// as a stable sort of everything added would have them, twice over.
func TestSortsStablyAcrossRuns(t *testing.T) {
	for _, buffer := range []int{1 << 30, 4 << 10, 200} {
		t.Run(fmt.Sprint(buffer), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			s := spillsort.New(nil)
			s.Dir, s.Buffer = t.TempDir(), buffer
			defer s.Close()
			type kv struct{ k, v string }
			var want []kv
			for i := range 5000 {
				k := string(spillsort.IntKey(nil, r.IntN(700)-350))
				v := fmt.Sprintf("row %d", i)
				want = append(want, kv{k, v})
				s.Add([]byte(k), []byte(v))
			}
			slices.SortStableFunc(want, func(a, b kv) int {
				switch {
				case a.k < b.k:
					return -1
				case a.k > b.k:
					return 1
				}
				return 0
			})
			for pass := range 2 {
				var got []kv
				if err := s.Each(func(k, v []byte) error {
					got = append(got, kv{string(k), string(v)})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("pass %d: %d records out of order (of %d)", pass, len(got), len(want))
				}
			}
			if buffer < 1<<20 && s.Runs() < 2 {
				t.Fatalf("%d runs with a %d-byte buffer, want several", s.Runs(), buffer)
			}
		})
	}
}

// TestDefaultDir: a sorter given no Dir writes its runs in DefaultDir (the aggregator's
// --spill-dir), not the OS temp dir: one that cannot be written there keeps its records
// in memory, one that can writes runs; CheckDir tells the two apart before any sort.
func TestDefaultDir(t *testing.T) {
	defer func(d string) { spillsort.DefaultDir = d }(spillsort.DefaultDir)
	for _, c := range []struct {
		dir  string
		runs bool
	}{{t.TempDir() + "/missing", false}, {t.TempDir(), true}} {
		spillsort.DefaultDir = c.dir
		if err := spillsort.CheckDir(c.dir); (err == nil) != c.runs {
			t.Errorf("CheckDir(%s): %v", c.dir, err)
		}
		s := spillsort.New(nil)
		s.Buffer = 256
		for i := range 100 {
			s.Add(spillsort.IntKey(nil, i), []byte("a row of the batch"))
		}
		if (s.Runs() > 0) != c.runs {
			t.Errorf("DefaultDir %s: %d runs written", c.dir, s.Runs())
		}
		n := 0
		if err := s.Each(func(_, _ []byte) error { n++; return nil }); err != nil || n != 100 {
			t.Errorf("DefaultDir %s: %d records back, %v", c.dir, n, err)
		}
		s.Close()
	}
}
