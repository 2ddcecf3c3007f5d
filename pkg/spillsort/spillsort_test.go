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
