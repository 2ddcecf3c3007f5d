package spillwords

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWordsAgainstModel: random appends, grows, sets and gets over a budget of a few
// pages read back what a plain slice holds, pages going to the file and back many times.
func TestWordsAgainstModel(t *testing.T) {
	for _, budget := range []int{1, 3 * pageBytes, 64 * pageBytes} {
		w := New(t.TempDir(), budget)
		var model []uint64
		r := rand.New(rand.NewPCG(1, uint64(budget)))
		for range 200_000 {
			switch op := r.IntN(10); {
			case op < 3:
				v := r.Uint64()
				w.Append(v)
				model = append(model, v)
			case op == 3 && len(model) < 100_000:
				n := len(model) + r.IntN(2*PageWords)
				w.Grow(n)
				model = append(model, make([]uint64, n-len(model))...)
			case op < 7 && len(model) > 0:
				i := pick(r, len(model))
				v := r.Uint64() >> r.IntN(64) // zeros too
				w.Set(i, v)
				model[i] = v
			case len(model) > 0:
				i := pick(r, len(model))
				if got := w.Get(i); got != model[i] {
					t.Fatalf("budget %d: word %d is %d, want %d", budget, i, got, model[i])
				}
			}
		}
		if w.Len() != len(model) {
			t.Fatalf("budget %d: %d words, want %d", budget, w.Len(), len(model))
		}
		for i, v := range model {
			if got := w.Get(i); got != v {
				t.Fatalf("budget %d: word %d is %d, want %d at the end", budget, i, got, v)
			}
		}
		if max(1, budget/pageBytes) < len(model)/PageWords && !w.Written() {
			t.Fatalf("budget %d: nothing was written out", budget)
		}
		if got, most := w.Resident(), max(1, budget/pageBytes); got > most {
			t.Fatalf("budget %d: %d pages resident, budget %d", budget, got, most)
		}
		w.Close()
	}
}

// pick is mostly a recent word (the jobs in flight), sometimes any.
func pick(r *rand.Rand, n int) int {
	if r.IntN(4) == 0 {
		return r.IntN(n)
	}
	return n - 1 - r.IntN(min(n, 3*PageWords))
}

// TestWordsInMemoryWithoutDir: no dir, no budget: every page stays.
func TestWordsInMemoryWithoutDir(t *testing.T) {
	w := New("", pageBytes)
	for i := range 10 * PageWords {
		w.Append(uint64(i))
	}
	if w.Written() || w.Resident() != 10 {
		t.Fatalf("written %v, %d pages resident, want none written and 10", w.Written(), w.Resident())
	}
}

// TestWordsKeepWhatCannotBeWritten: a dir that takes no file keeps every word, and right.
func TestWordsKeepWhatCannotBeWritten(t *testing.T) {
	w := New(filepath.Join(t.TempDir(), "absent"), pageBytes)
	for i := range 10 * PageWords {
		w.Append(uint64(i) + 1)
	}
	for i := range 10 * PageWords {
		if got := w.Get(i); got != uint64(i)+1 {
			t.Fatalf("word %d is %d, want %d", i, got, i+1)
		}
	}
	if w.Written() {
		t.Fatal("written to a dir that does not exist")
	}
}

// TestWordsHeapIsTheBudget: a million words, 64 KiB resident, cost the heap their
// budget and a pointer and a bit a page, not 8 bytes a word.
func TestWordsHeapIsTheBudget(t *testing.T) {
	const n = 1_000_000
	before := heap()
	w := New(t.TempDir(), 64<<10)
	for i := range n {
		w.Append(uint64(i) * 3)
	}
	for i := n - 1; i >= 0; i -= 997 {
		if got := w.Get(i); got != uint64(i)*3 {
			t.Fatalf("word %d is %d", i, got)
		}
	}
	used := heap() - before
	t.Logf("%d words: %d bytes of heap (%.2f a word)", n, used, float64(used)/n)
	if used > 200<<10 {
		t.Fatalf("%d words hold %d bytes of heap, want the 64 KiB budget and a little", n, used)
	}
	runtime.KeepAlive(w)
}

func heap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func BenchmarkWordsRecentWindow(b *testing.B) {
	w := New(b.TempDir(), 4<<20)
	for i := range 1_000_000 {
		w.Append(uint64(i))
	}
	r := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for range b.N {
		i := 1_000_000 - 1 - r.IntN(300_000)
		w.Set(i, w.Get(i)+1)
	}
}
