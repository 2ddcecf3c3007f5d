package rulebook

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// maxPlaces is how many job records a Memory can number: its index's words keep a place
// in 32 bits and its table stays within 2^32 words.
const maxPlaces = 1 << 31

// jobIndex finds a job's place by its key without holding the key: an open-addressing
// table of words, probed linearly, each the top 32 bits of the key's hash (its tag,
// which also says where the key's probe starts) and the place plus one (0 is an empty
// word). It holds no pointer, so the collector never walks it, and 8 bytes a word at
// most three quarters full: 11 to 21 bytes a job. Keys sharing a tag are all offered
// (candidates), and the caller checks each against the key stored with the record, so a
// collision costs a read, never another job's record.
type jobIndex struct {
	seed  maphash.Seed
	words []uint64
	n     int
	// shift turns a tag into the word its probe starts at: 32 less log2(len(words)).
	shift uint
	// tagOf replaces the hash in tests, to make keys collide.
	tagOf func(string) uint32
}

func (x *jobIndex) init() {
	x.seed = maphash.MakeSeed()
	x.words, x.n, x.shift = make([]uint64, 64), 0, 32-6
}

func (x *jobIndex) tag(key string) uint32 {
	if x.tagOf != nil {
		return x.tagOf(key)
	}
	return uint32(maphash.String(x.seed, key) >> 32)
}

// candidates are the places of the keys that share key's tag: key's, if it has one,
// among them.
func (x *jobIndex) candidates(key string) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		tag := x.tag(key)
		mask := len(x.words) - 1
		for i := int(tag >> x.shift); ; i = (i + 1) & mask {
			w := x.words[i]
			if w == 0 {
				return
			}
			if uint32(w>>32) == tag && !yield(uint32(w)-1) {
				return
			}
		}
	}
}

// add indexes key, which has no place yet, at place p.
func (x *jobIndex) add(key string, p uint32) {
	if (x.n+1)*4 > len(x.words)*3 {
		x.grow()
	}
	x.insert(uint64(x.tag(key))<<32 | (uint64(p) + 1))
	x.n++
}

func (x *jobIndex) insert(w uint64) {
	mask := len(x.words) - 1
	i := int(uint32(w>>32) >> x.shift)
	for x.words[i] != 0 {
		i = (i + 1) & mask
	}
	x.words[i] = w
}

// grow doubles the table: a word's tag says where it goes, so no key is needed.
func (x *jobIndex) grow() {
	old := x.words
	x.words = make([]uint64, 2*len(old))
	x.shift = uint(32 - bits.TrailingZeros(uint(len(x.words))))
	for _, w := range old {
		if w != 0 {
			x.insert(w)
		}
	}
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
