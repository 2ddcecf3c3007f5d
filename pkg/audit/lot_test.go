package audit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLotSpills: a lot holding a few hundred bytes in memory finds each record it wrote
// out as one kept in memory does, the first put of a key and type first, checks a
// record's own id, closes a segment once all its records are taken, and hands the rest
// by sequence, ties in the order put.
func TestLotSpills(t *testing.T) {
	for _, c := range []struct {
		what          string
		budget, slots int
	}{{"in memory", 1 << 30, 1 << 15}, {"written out", 512, 16}} {
		t.Run(c.what, func(t *testing.T) {
			defer func(b, s int) { lotBudget, lotSlots = b, s }(lotBudget, lotSlots)
			lotBudget, lotSlots = c.budget, c.slots
			l := newLot(t.TempDir())
			defer l.close()
			type rec struct {
				k    stepKey
				typ  uint8
				seq  uint64
				data string
			}
			var model []rec
			const n = 3000
			for i := range n {
				k := keyOf(fmt.Sprintf("%032x", i/3)) // three records a key
				r := rec{k, uint8(i % 2), uint64(n - i/7), fmt.Sprintf("%032x/record %d", i/3, i)}
				model = append(model, r)
				l.put(r.k, r.typ, r.seq, []byte(r.data))
			}
			if c.budget < 1<<30 && len(l.segs) < 10 {
				t.Fatalf("%d segments written: the test wants many", len(l.segs))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			order := rng.Perm(n / 3)
			taken := map[int]bool{}
			for _, key := range order[:n/4] {
				k := keyOf(fmt.Sprintf("%032x", key))
				typ := uint8(rng.IntN(2))
				// The first of the key's records of that type not taken yet.
				want := -1
				for i := key * 3; i < key*3+3; i++ {
					if !taken[i] && model[i].typ == typ {
						want = i
						break
					}
				}
				if _, ok := l.take(k, typ, func([]byte) bool { return false }); ok {
					t.Fatal("took a record whose id did not check")
				}
				got, ok := l.take(k, typ, func(b []byte) bool { return string(b[:32]) == fmt.Sprintf("%032x", key) })
				switch {
				case want < 0 && ok:
					t.Fatalf("key %d type %d: took %q, none waits", key, typ, got)
				case want >= 0 && (!ok || string(got) != model[want].data):
					t.Fatalf("key %d type %d: took %q (%v), want %q", key, typ, got, ok, model[want].data)
				}
				if want >= 0 {
					taken[want] = true
				}
			}
			// Every record of the first segments taken: those segments are closed.
			for i := range 200 {
				if got, ok := l.take(model[i].k, model[i].typ, func([]byte) bool { return true }); ok {
					taken[slices.IndexFunc(model, func(r rec) bool { return r.data == string(got) })] = true
				}
			}
			if c.budget < 1<<30 && (len(l.files.open) >= len(l.segs) || l.segs[0].f != nil) {
				t.Fatalf("%d of %d segments open, the first %v: a segment all taken stays", len(l.files.open), len(l.segs), l.segs[0].f)
			}
			var want []string
			var left []rec
			for i, r := range model {
				if !taken[i] {
					left = append(left, r)
				}
			}
			slices.SortStableFunc(left, func(a, b rec) int { return int(a.seq) - int(b.seq) })
			for _, r := range left {
				want = append(want, r.data)
			}
			var got []string
			if err := l.each(func(b []byte) error { got = append(got, string(b)); return nil }); err != nil {
				t.Fatal(err)
			}
			if l.len() != len(want) || !slices.Equal(got, want) {
				t.Fatalf("%d wait (len %d), got %d: first %q, want %q", len(want), l.len(), len(got), got[:3], want[:3])
			}
		})
	}
}
