package rulebook

import (
	"encoding/binary"
	"hash/maphash"
	"iter"
	"math/bits"

	"github.com/tribunal-dev/tribunal/pkg/stepset"
)

// maxPlaces is how many job records a Memory can number: its index's words keep a place
// in 32 bits and its table stays within 2^32 words.
const maxPlaces = 1 << 31

// jobIndex finds a job's place by its key without holding the key: a stepset.Set
// under the key's 128-bit hash (two maphash sums of their own seeds), the place plus one
// its value. The set keeps the newest entries in a table of keySlots in memory and the
// rest in sorted runs in the spill dir, about 1.5 bytes a job on the heap (its bloom
// filters and page fences), so the index does not grow with the jobs replayed but by
// those bytes. A key whose hash another key took first (two keys of one 128-bit sum,
// which only a test's hashOf makes) is in over. The caller checks each place offered
// against the key stored with the record, so a collision costs a read, never another
// job's record.
type jobIndex struct {
	seeds [2]maphash.Seed
	set   *stepset.Set
	over  map[string]uint32
	// hashOf replaces the hash in tests, to make keys collide.
	hashOf func(string) stepset.Key
}

// keySlots is the size of the index's table in memory: the jobs in flight are mostly the
// newest, whose lookups it answers without a read (4 MiB).
const keySlots = 1 << 17

// init starts the index with a table of slots entries in memory (keySlots but in tests),
// the rest in dir ("": all in memory).
func (x *jobIndex) init(dir string, slots int) {
	x.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	x.set, x.over = stepset.NewSized(dir, slots), map[string]uint32{}
}

func (x *jobIndex) hash(key string) stepset.Key {
	if x.hashOf != nil {
		return x.hashOf(key)
	}
	var k stepset.Key
	binary.LittleEndian.PutUint64(k[:8], maphash.String(x.seeds[0], key))
	binary.LittleEndian.PutUint64(k[8:], maphash.String(x.seeds[1], key))
	return k
}

// candidates are the places the index has for key: its own, if it has one, among them.
func (x *jobIndex) candidates(key string) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		if p, ok := x.over[key]; ok && !yield(p) {
			return
		}
		if v, ok := x.set.Get(x.hash(key)); ok {
			yield(uint32(v[0] - 1))
		}
	}
}

// add indexes key, which has no place yet, at place p.
func (x *jobIndex) add(key string, p uint32) {
	k := x.hash(key)
	if _, ok := x.set.Get(k); ok {
		x.over[key] = p
		return
	}
	x.set.Put(k, stepset.Value{uint64(p) + 1})
}

// finals is the set of a batch's final indices: bits over 0 up to about twice the jobs
// recorded, and a map for an index below or beyond those (which only a stream that
// disagrees with itself has), so that no index makes the set larger than its batch.
type finals struct {
	bits []uint64
	far  map[int]bool
}

// add adds index i, given how many jobs the batch recorded, and reports whether it was
// not in the set yet.
func (f *finals) add(i, recorded int) bool {
	if f.has(i) {
		return false
	}
	if i >= 0 && i < 2*recorded+4096 {
		if w := i / 64; w >= len(f.bits) {
			f.bits = append(f.bits, make([]uint64, w+1-len(f.bits))...)
		}
		f.bits[i/64] |= 1 << (i % 64)
		return true
	}
	if f.far == nil {
		f.far = map[int]bool{}
	}
	f.far[i] = true
	return true
}

func (f *finals) has(i int) bool {
	if i >= 0 && i/64 < len(f.bits) && f.bits[i/64]&(1<<(i%64)) != 0 {
		return true
	}
	return f.far[i]
}

// below counts the indices in the set from 0 to n, n excluded.
func (f *finals) below(n int) int {
	c := 0
	for w, b := range f.bits {
		switch {
		case (w+1)*64 <= n:
			c += bits.OnesCount64(b)
		case w*64 < n:
			c += bits.OnesCount64(b & (1<<(n-w*64) - 1))
		}
	}
	for i := range f.far {
		if i >= 0 && i < n {
			c++
		}
	}
	return c
}
