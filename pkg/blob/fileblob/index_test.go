package fileblob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// synthKey is the i-th synthetic key: a digest, spread as the store's keys are.
func synthKey(i int) [32]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	return sha256.Sum256(b[:])
}

// indexOnly is a pack-mode store whose tenant index is filled through index, with
// packs packs registered (never opened) and the tenant marked loaded, so lookups never
// scan.
func indexOnly(t testing.TB, packs int) (*Store, *tenantIndex) {
	t.Helper()
	s, err := New(t.TempDir(), Options{Pack: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ti := s.tenantIdx("t")
	s.imu.Lock()
	s.intern([]byte(blob.DefaultMediaType)) // mt 0
	for i := range packs {
		s.addPack(ti, &pack{path: "p" + string(rune('a'+i%26))})
	}
	s.imu.Unlock()
	ti.loaded.Store(true)
	return s, ti
}

// TestIndexBytesPerEntry puts 1,000,000 synthetic entries through the index and bounds
// the heap they retain: the index holds every packed object of a batch (3,000,000 and
// more at 1,000,000 ACs), so its cost per entry is a share of the all-in-one mode's peak.
func TestIndexBytesPerEntry(t *testing.T) {
	const n = 1_000_000
	s, ti := indexOnly(t, 64)
	s.imu.Lock()
	mt := s.intern([]byte("application/json"))
	s.imu.Unlock()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s.imu.Lock()
	for i := range n {
		s.index(ti, synthKey(i), loc{off: int64(i%20000) * 3000, size: uint32(1000 + i%5000), pack: uint32(i % 64), mt: mt})
	}
	s.imu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%d entries: %.1f B of retained heap per entry", n, per)
	for _, i := range []int{0, n / 2, n - 1} {
		l, _, _, ok := s.lookup(ti, synthKey(i))
		if !ok || l.size != uint32(1000+i%5000) || l.pack != uint32(i%64) {
			t.Fatalf("entry %d: got %+v, %v", i, l, ok)
		}
	}
	if per > 64 {
		t.Errorf("the index retains %.1f B per entry, want at most 64", per)
	}
	runtime.KeepAlive(ti)
}

// BenchmarkIndexInsert is the index's cost per packed object put: s.index under the
// write lock, into an index of 1,000,000 entries and growing.
func BenchmarkIndexInsert(b *testing.B) {
	s, ti := indexOnly(b, 16)
	s.imu.Lock()
	for i := range 1_000_000 {
		s.index(ti, synthKey(i), loc{off: int64(i), size: 100, pack: uint32(i % 16)})
	}
	s.imu.Unlock()
	keys := make([][32]byte, b.N)
	for i := range keys {
		keys[i] = synthKey(1_000_000 + i)
	}
	b.ResetTimer()
	for i := range b.N {
		s.imu.Lock()
		s.index(ti, keys[i], loc{off: int64(i), size: 100, pack: uint32(i % 16)})
		s.imu.Unlock()
	}
}

// BenchmarkIndexLookup is a Get's index lookup in an index of 1,000,000 entries.
func BenchmarkIndexLookup(b *testing.B) {
	const n = 1_000_000
	s, ti := indexOnly(b, 16)
	s.imu.Lock()
	for i := range n {
		s.index(ti, synthKey(i), loc{off: int64(i), size: 100, pack: uint32(i % 16)})
	}
	s.imu.Unlock()
	keys := make([][32]byte, 4096)
	for i := range keys {
		keys[i] = synthKey(rand.IntN(n))
	}
	b.ResetTimer()
	for i := range b.N {
		if _, _, _, ok := s.lookup(ti, keys[i%len(keys)]); !ok {
			b.Fatal("missing")
		}
	}
}

// benchObject is the i-th small object of the Put and Get benchmarks.
func benchObject(i int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, 1024)
	binary.LittleEndian.PutUint64(b, uint64(i))
	return b
}

// BenchmarkPackPut is a pack-mode Put of a 1 KiB object (no fsync).
func BenchmarkPackPut(b *testing.B) {
	s, err := New(b.TempDir(), Options{Pack: true, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Put(ctx, "t", bytes.NewReader(benchObject(i)), blob.PutOptions{MediaType: "application/json"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackGet is Open and a full verified read of one of 100,000 packed 1 KiB
// objects.
func BenchmarkPackGet(b *testing.B) {
	const n = 100_000
	s, err := New(b.TempDir(), Options{Pack: true, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	refs := make([]blob.Ref, n)
	for i := range n {
		a, err := s.Put(ctx, "t", bytes.NewReader(benchObject(i)), blob.PutOptions{MediaType: "application/json"})
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = a.Ref
	}
	order := rand.Perm(n)
	b.ResetTimer()
	for i := range b.N {
		rc, _, err := s.Open(ctx, refs[order[i%n]])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
}

// TestIndexAgainstMap runs interleaved inserts, replacements (some with locations too
// wide for an entry), deletes and lookups against the index and a plain map, comparing
// them after every step and in full now and then. The keys crowd into four shards so
// that runs grow, merge and carry dead entries, and a fifth share bytes 1-4, so that
// fences tie.
func TestIndexAgainstMap(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(29, 5))
	var x objIndex
	model := map[[32]byte]loc{}
	pool := make([][32]byte, 40_000)
	for i := range pool {
		pool[i] = synthKey(i)
		pool[i][0] = byte(rng.IntN(4))
		if i%5 == 0 { // keys whose fences tie
			copy(pool[i][1:5], "fence")
		}
	}
	randLoc := func() loc {
		l := loc{off: rng.Int64N(64 << 20), size: rng.Uint32(), pack: rng.Uint32N(100), mt: rng.Uint32N(8)}
		switch rng.IntN(20) {
		case 0:
			l.off = 1<<32 + rng.Int64N(1<<20)
		case 1:
			l.pack = maxPack + rng.Uint32N(10)
		case 2:
			l.mt = 1<<mtBits + rng.Uint32N(10)
		case 3:
			l.off = math.MaxUint32 // the widest that fits
			l.pack, l.mt = maxPack, 1<<mtBits-1
		}
		return l
	}
	ops := 300_000
	if testing.Short() {
		ops = 150_000
	}
	for step := range ops {
		key := pool[rng.IntN(len(pool))]
		switch op := rng.IntN(10); {
		case op < 6:
			l := randLoc()
			old, replaced := x.put(key, l)
			mOld, mHad := model[key]
			if replaced != mHad || (mHad && old != mOld) {
				t.Fatalf("step %d: put replaced %+v, %v; the model had %+v, %v", step, old, replaced, mOld, mHad)
			}
			model[key] = l
		case op < 8:
			l, ok := x.del(key)
			mL, mOk := model[key]
			if ok != mOk || (ok && l != mL) {
				t.Fatalf("step %d: del gave %+v, %v; the model had %+v, %v", step, l, ok, mL, mOk)
			}
			delete(model, key)
		default:
			l, ok := x.get(key)
			mL, mOk := model[key]
			if ok != mOk || (ok && l != mL) {
				t.Fatalf("step %d: get gave %+v, %v; the model has %+v, %v", step, l, ok, mL, mOk)
			}
		}
		if x.len() != len(model) {
			t.Fatalf("step %d: len %d, the model has %d", step, x.len(), len(model))
		}
		if step%50_000 == 0 || step == ops-1 {
			seen := map[[32]byte]loc{}
			x.each(func(k [32]byte, l loc) {
				if _, dup := seen[k]; dup {
					t.Fatalf("step %d: each gave %x twice", step, k)
				}
				seen[k] = l
			})
			if !maps.Equal(seen, model) {
				t.Fatalf("step %d: each gave %d entries unlike the model's %d", step, len(seen), len(model))
			}
			for s := range x.shards {
				sh := &x.shards[s]
				for _, es := range [][]entry{sh.run, sh.recent} {
					if !slices.IsSortedFunc(es, func(a, b entry) int { return bytes.Compare(a.key[:], b.key[:]) }) {
						t.Fatalf("step %d: shard %d is not sorted", step, s)
					}
				}
				if len(sh.fence) != (len(sh.run)+fenceEvery-1)/fenceEvery {
					t.Fatalf("step %d: shard %d has %d fences for %d entries", step, s, len(sh.fence), len(sh.run))
				}
				for b, f := range sh.fence {
					if f != binary.BigEndian.Uint32(sh.run[b*fenceEvery].key[1:5]) {
						t.Fatalf("step %d: shard %d: fence %d is stale", step, s, b)
					}
				}
			}
		}
	}
	// Deleting everything leaves nothing behind.
	for k := range model {
		if _, ok := x.del(k); !ok {
			t.Fatalf("del %x: missing", k)
		}
	}
	runs := 0
	for s := range x.shards {
		runs += len(x.shards[s].run)
	}
	if x.len() != 0 || len(x.wide) != 0 || runs > 4*len(pool)/2 {
		t.Fatalf("after deleting everything: len %d, wide %d, run entries %d", x.len(), len(x.wide), runs)
	}
}
