package rulebook

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/stepset"
)

// TestFinalsAsAMap: the final indices' bitset counts as the map of every index it
// replaced, for indices below 0, past the batch's size and far past the jobs recorded
// (a stream that disagrees with itself), each counted once however often it is final.
func TestFinalsAsAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var f finals
	want := map[int]bool{}
	for step := range 20000 {
		var i int
		switch r.IntN(10) {
		case 0:
			i = -1 - r.IntN(100)
		case 1:
			i = r.IntN(1 << 40)
		case 2:
			i = 1<<62 + r.IntN(10)
		default:
			i = r.IntN(3000)
		}
		if got := f.add(i, step/4); got == want[i] {
			t.Fatalf("add(%d) = %v, with it %v in the set", i, got, want[i])
		}
		want[i] = true
		if step%997 == 0 {
			for _, n := range []int{0, 1, 63, 64, 65, 1000, 3000, 1 << 41, 1<<62 + 5} {
				c := 0
				for i := range want {
					if i >= 0 && i < n {
						c++
					}
				}
				if got := f.below(n); got != c {
					t.Fatalf("below(%d) = %d, want %d", n, got, c)
				}
			}
		}
	}
	for i := range want {
		if !f.has(i) {
			t.Fatalf("%d is not in the set", i)
		}
	}
	if len(f.bits)*64 > 2*20000/4+4096+64 {
		t.Errorf("the bitset covers %d indices, more than twice the jobs recorded", len(f.bits)*64)
	}
}

// TestJobIndexOffersEveryCandidate: the index offers each key's place, its entries in
// memory and written out, and for a key never added nothing, or (when every key's hash
// is alike) only places the caller's check of the key turns down; a key whose hash was
// taken offers its own place first.
func TestJobIndexOffersEveryCandidate(t *testing.T) {
	for _, collide := range []bool{false, true} {
		for _, dir := range []string{"", t.TempDir()} {
			var x jobIndex
			x.init(dir, 64) // a few entries in memory, most in runs
			if collide {
				x.hashOf = func(string) stepset.Key { return stepset.Key{1} }
			}
			const n = 3000
			for p := range n {
				x.add(fmt.Sprintf("t.b.AC-%d", p), uint32(p))
			}
			if dir != "" && !collide && x.set.Runs() == 0 {
				t.Fatalf("collide %v: nothing written out", collide)
			}
			for p := range n {
				offered := slices.Collect(x.candidates(fmt.Sprintf("t.b.AC-%d", p)))
				if len(offered) == 0 || offered[0] != uint32(p) || len(offered) > 2 {
					t.Fatalf("collide %v, dir %q: AC-%d (place %d) offered %v", collide, dir, p, p, offered)
				}
			}
			offered := slices.Collect(x.candidates("t.b.none"))
			if want := map[bool]int{false: 0, true: 1}[collide]; len(offered) != want || (collide && offered[0] != 0) {
				t.Errorf("collide %v, dir %q: a key never added is offered %v", collide, dir, offered)
			}
		}
	}
}

// TestBatchOrderByIndex: a batch's order, kept in a word a job, sorts by each job's
// index as recorded, stably, for indices an int32 does not hold too (below 0 or far past
// the batch, which only a stream that disagrees with itself has), in memory and through
// a sort written out; a sorted order is read as it is, not sorted again.
func TestBatchOrderByIndex(t *testing.T) {
	indices := []int{3, math.MinInt32, 1 << 40, -1, 3, math.MaxInt32, -1 << 40, 0, math.MaxInt32 + 1, 2, 1 << 40}
	want := make([]int, len(indices))
	for p := range want {
		want[p] = p
	}
	slices.SortStableFunc(want, func(x, y int) int { return cmp.Compare(indices[x], indices[y]) })
	defer func(n int) { spillsort.DefaultBuffer = n }(spillsort.DefaultBuffer)
	spillsort.DefaultBuffer = 64 // a few records a run
	for _, dir := range []string{"", t.TempDir()} {
		b := memBatch{spillDir: dir}
		for p, i := range indices {
			b.add(i, uint32(p))
		}
		wrote := spillsort.Written()
		var got []int
		for o := range b.byIndex() {
			if b.indexOf(o) != indices[o.place] {
				t.Fatalf("dir %q: place %d: index %d, recorded %d", dir, o.place, b.indexOf(o), indices[o.place])
			}
			got = append(got, int(o.place))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("dir %q: sorted places %v, want %v", dir, got, want)
		}
		if wrote = spillsort.Written() - wrote; (dir != "") != (wrote > 0) {
			t.Fatalf("dir %q: the sort wrote %d bytes out", dir, wrote)
		}
		for p, o := range slices.Collect(b.each()) {
			if int(o.place) != p || b.indexOf(o) != indices[p] {
				t.Fatalf("dir %q: sorting changed the recorded order at %d: %+v", dir, p, o)
			}
		}
		sorted := memBatch{spillDir: dir}
		for p := range 5 {
			sorted.add(p, uint32(p))
		}
		before := spillsort.Written()
		var places []uint32
		for o := range sorted.byIndex() {
			places = append(places, o.place)
		}
		if !slices.Equal(places, []uint32{0, 1, 2, 3, 4}) || spillsort.Written() != before {
			t.Errorf("dir %q: a sorted order read %v, writing %d bytes to sort it", dir, places, spillsort.Written()-before)
		}
	}
}
