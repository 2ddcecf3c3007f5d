package stepset

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func randomKey(rng *rand.Rand) Key {
	var k Key
	for i := range k {
		k[i] = byte(rng.Uint32())
	}
	return k
}

// clusteredKey shares all but its last bytes with its neighbours, so pages and fences
// split runs of nearly equal keys.
func clusteredKey(rng *rand.Rand) Key {
	var k Key
	k[0] = byte(rng.IntN(3))
	k[15] = byte(rng.Uint32())
	k[14] = byte(rng.IntN(4))
	return k
}

// check compares every key of the model, and some it lacks, with s.
func check[V Words](t *testing.T, s *Of[V], model map[Key]V, rng *rand.Rand) {
	t.Helper()
	if s.Len() != len(model) {
		t.Fatalf("Len %d, want %d", s.Len(), len(model))
	}
	for k, want := range model {
		if got, ok := s.Get(k); !ok || got != want {
			t.Fatalf("Get(%x) = %v, %v; want %v", k, got, ok, want)
		}
	}
	for range 1000 {
		k := randomKey(rng)
		if _, in := model[k]; in {
			continue
		}
		if v, ok := s.Get(k); ok {
			t.Fatalf("Get(%x) = %v of a key never put", k, v)
		}
	}
}

// TestSetAgainstMap puts, replaces and gets entries at random, through a hot table of 64
// slots so they are spread over many runs and merges, and compares every answer with a
// plain map's, for values of two words and of four.
func TestSetAgainstMap(t *testing.T) {
	t.Run("two words", againstMap[Value])
	t.Run("four words", againstMap[Wide])
}

func againstMap[V Words](t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(*rand.Rand) Key
	}{{"random", randomKey}, {"clustered", clusteredKey}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			s := NewOf[V](t.TempDir(), 64)
			defer s.Close()
			model := map[Key]V{}
			var keys []Key
			maxRuns := 0
			for op := range 60000 {
				switch x := rng.IntN(10); {
				case x < 5 || len(keys) == 0: // a new key, or one already put
					k := tc.key(rng)
					var v V
					for i := range len(v) {
						v[i] = rng.Uint64()
					}
					v[1] = uint64(op)
					if _, in := model[k]; !in {
						keys = append(keys, k)
					}
					model[k] = v
					s.Put(k, v)
				case x < 7: // replace an old value, as the audit's claim does
					k := keys[rng.IntN(len(keys))]
					v := model[k]
					v[0] |= 1 << 8
					model[k] = v
					s.Put(k, v)
				default:
					k := keys[rng.IntN(len(keys))]
					if x == 9 {
						k = tc.key(rng)
					}
					want, in := model[k]
					got, ok := s.Get(k)
					if ok != in || got != want {
						t.Fatalf("op %d: Get(%x) = %v, %v; want %v, %v", op, k, got, ok, want, in)
					}
				}
				maxRuns = max(maxRuns, s.Runs())
			}
			if s.Runs() < 2 {
				t.Fatalf("%d runs: the test did not spill", s.Runs())
			}
			// 36,000 entries at 48 a run are 750 runs; merged four of a size into one,
			// at most three of each size remain.
			if maxRuns > 3*6 {
				t.Errorf("%d runs at most: runs are not merged", maxRuns)
			}
			t.Logf("%d entries, %d runs (at most %d)", len(model), s.Runs(), maxRuns)
			check(t, s, model, rng)
		})
	}
}

// TestFilterRatesFollowRunSizes: each run's filter lets through lookups of keys it does
// not hold at a rate in proportion to its size, from 1 % at one spill's size to at most
// 50 %, so the bits an entry fall as the runs grow while a lookup of a new key reads, in
// vain, about the sum of the rates and no more.
func TestFilterRatesFollowRunSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	s := NewSized(t.TempDir(), 256) // a spill is 192 entries
	defer s.Close()
	// Until there are runs of four sizes, three of each but the largest.
	for n := 0; len(s.runs) < 10; n++ {
		if n == 1_000_000 {
			t.Fatalf("%d runs after %d entries", len(s.runs), n)
		}
		s.Put(randomKey(rng), Value{1})
	}
	sum, bits, entries := 0.0, 0, 0
	for _, r := range s.runs {
		p := s.falsePositive(r.n)
		want := min(0.5, max(0.01, 0.01*float64(r.n)/192))
		if p != want {
			t.Errorf("run of %d entries: rate %.3f, want %.3f", r.n, p, want)
		}
		sum += p
		bits += int(r.filter.Cap())
		entries += r.n
	}
	// At 1 % each the filters would cost 9.6 bits an entry.
	if perEntry := float64(bits) / float64(entries); perEntry > 4 {
		t.Errorf("filters cost %.1f bits an entry, want under 4", perEntry)
	}
	const lookups = 20_000
	before := s.reads
	for range lookups {
		if _, ok := s.Get(randomKey(rng)); ok {
			t.Fatal("a key never put is found")
		}
	}
	perLookup := float64(s.reads-before) / lookups
	if perLookup > sum*1.2+0.01 {
		t.Errorf("a lookup of a new key reads %.3f pages, over the runs' rates' sum %.3f", perLookup, sum)
	}
	t.Logf("%d entries in %d runs: filters %.1f bits an entry, a new key's lookup reads %.3f pages (rates' sum %.3f)",
		entries, len(s.runs), float64(bits)/float64(entries), perLookup, sum)
}

// TestSetInMemory: without a folder, or with one that takes no file, every entry stays in
// memory and is found.
func TestSetInMemory(t *testing.T) {
	for _, dir := range []string{"", filepath.Join(t.TempDir(), "missing")} {
		rng := rand.New(rand.NewPCG(3, 4))
		s := NewSized(dir, 64)
		model := map[Key]Value{}
		for i := range 5000 {
			k := randomKey(rng)
			model[k] = Value{uint64(i), 7}
			s.Put(k, model[k])
		}
		if s.Runs() != 0 {
			t.Fatalf("dir %q: %d runs", dir, s.Runs())
		}
		check(t, s, model, rng)
	}
}

// TestSetValueNotWrittenInPlace: a run's entry whose file refuses the new value keeps it
// in the hot table, which is read first, and the newer copy wins when its run is merged
// with the older.
func TestSetValueNotWrittenInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := NewSized(t.TempDir(), 64)
	defer s.Close()
	model := map[Key]Value{}
	for i := 0; s.Runs() == 0; i++ {
		k := randomKey(rng)
		model[k] = Value{uint64(i)}
		s.Put(k, model[k])
	}
	// The run's file, read-only: it reads back but takes no write.
	r := s.runs[0]
	ro, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", r.f.Fd()))
	if err != nil {
		t.Skipf("no /proc to reopen the run read-only: %v", err)
	}
	s.files.open[ro] = true
	writable := r.f
	r.f = ro
	for k := range model {
		v := Value{model[k][0], 99}
		model[k] = v
		s.Put(k, v)
	}
	r.f = writable
	s.files.close(ro)
	check(t, s, model, rng)
	for len(s.runs) < 4 || s.runs[0].level == 0 {
		k := randomKey(rng)
		model[k] = Value{1, 2}
		s.Put(k, model[k])
	}
	check(t, s, model, rng)
}

// TestSetHeapPerEntry holds what a Set keeps on the heap to a small constant an entry,
// whatever their count: 2,000,000 entries (the steps of some 330,000 jobs) retain the hot
// table and under 2 bytes an entry of runs' filters and fences. A plain map of the same
// entries, what the audit kept before, retains over 40 bytes an entry and fails it.
func TestSetHeapPerEntry(t *testing.T) {
	const n = 2_000_000
	const maxPerEntry = 8.0
	rng := rand.New(rand.NewPCG(7, 8))
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = randomKey(rng)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	s := New(t.TempDir())
	defer s.Close()
	for i, k := range keys {
		s.Put(k, Value{uint64(i), uint64(i)})
	}
	set := float64(int64(heap())-int64(before)) / n
	for _, i := range []int{0, n / 2, n - 1} {
		if v, ok := s.Get(keys[i]); !ok || v[0] != uint64(i) {
			t.Fatalf("entry %d lost: %v, %v", i, v, ok)
		}
	}
	runtime.KeepAlive(s)

	before = heap()
	m := make(map[Key]Value)
	for i, k := range keys {
		m[k] = Value{uint64(i), uint64(i)}
	}
	plain := float64(int64(heap())-int64(before)) / n
	runtime.KeepAlive(m)
	t.Logf("%d entries in %d runs: %.1f bytes an entry retained (a map: %.1f)", n, s.Runs(), set, plain)
	if set > maxPerEntry {
		t.Errorf("the set retains %.1f bytes an entry, over %.0f", set, maxPerEntry)
	}
	if plain <= maxPerEntry {
		t.Errorf("a plain map retains %.1f bytes an entry, within the bound: the bound proves nothing", plain)
	}
}

// The benchmarks measure the audit's calls: a put of a new key and a get of one absent
// (every step, looked up for a duplicate first), a get of a recent key (a chain's link,
// hot) and of an old one (cold, in a run), and a put over an old one (its claim).
func benchSet(b *testing.B, n int) (*Set, []Key) {
	rng := rand.New(rand.NewPCG(9, 10))
	s := New(b.TempDir())
	b.Cleanup(s.Close)
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = randomKey(rng)
		s.Put(keys[i], Value{uint64(i)})
	}
	return s, keys
}

func BenchmarkPutNew(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	keys := make([]Key, b.N)
	for i := range keys {
		keys[i] = randomKey(rng)
	}
	s := New(b.TempDir())
	defer s.Close()
	b.ResetTimer()
	for i := range b.N {
		k := keys[i]
		if _, ok := s.Get(k); !ok {
			s.Put(k, Value{uint64(i)})
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(s.Runs()), "runs")
}

func BenchmarkGetHot(b *testing.B) {
	s, keys := benchSet(b, 100_000)
	for i := 0; b.Loop(); i++ {
		s.Get(keys[i%len(keys)])
	}
}

// sizes are the steps of the 100,000-AC and the 1,000,000-AC audits.
var sizes = []int{600_000, 6_000_000}

func BenchmarkGetMiss(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, _ := benchSet(b, n)
			rng := rand.New(rand.NewPCG(13, 14))
			keys := make([]Key, 1<<16)
			for i := range keys {
				keys[i] = randomKey(rng)
			}
			runs := s.Runs()
			for i := 0; b.Loop(); i++ {
				s.Get(keys[i%len(keys)])
			}
			b.ReportMetric(float64(runs), "runs")
		})
	}
}

func BenchmarkGetCold(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, keys := benchSet(b, n)
			for i := 0; b.Loop(); i++ {
				// The oldest entries, long written out.
				s.Get(keys[(i*7919)%(len(keys)/2)])
			}
		})
	}
}

func BenchmarkClaimCold(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, keys := benchSet(b, n)
			for i := 0; b.Loop(); i++ {
				k := keys[(i*7919)%(len(keys)/2)]
				v, _ := s.Get(k)
				v[0] |= 1 << 8
				s.Put(k, v)
			}
		})
	}
}

// BenchmarkMapMiss is what the audit's map did for a get of an absent key, for
// comparison with BenchmarkGetMiss.
func BenchmarkMapMiss(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(9, 10))
			m := make(map[Key]Value)
			for i := range n {
				m[randomKey(rng)] = Value{uint64(i)}
			}
			keys := make([]Key, 1<<16)
			for i := range keys {
				keys[i] = randomKey(rng)
			}
			for i := 0; b.Loop(); i++ {
				_ = m[keys[i%len(keys)]]
			}
		})
	}
}
