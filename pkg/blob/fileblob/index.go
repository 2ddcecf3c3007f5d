package fileblob

import (
	"encoding/binary"
	"math"
	"slices"
)

// objIndex maps the digests of a tenant's packed objects to their locations: the part
// of the index in memory, what the index file (diskidx.go) does not hold yet, up to an
// eighth of the file, or everything when the folder cannot take a file. It can hold
// hundreds of thousands of objects, so it is built for bytes per entry: a Go map of [32]byte to loc cost about 134 B an object (buckets
// of 56 B slots, kept below full, doubling as it grows); this keeps 44 B entries in
// sorted slices, about 47 B an object.
//
// The entries are spread over 256 shards by the digest's first byte (digests are
// uniform, so the shards stay even). Each shard has a run, sorted and allocated to its
// exact length, and a small sorted slice of recent entries; when the recent ones reach
// about √(2 × run), the shard merges them into a new run. That keeps an insert's
// copying near its optimum (half the recent slice moved per insert, the run's copy
// amortised over the recent ones), a lookup at a search of the run's fences, of one
// block of the run and of the recent slice, and what a merge allocates besides the
// index at one shard's run: 0.5 MiB at 3,000,000 entries, where one sorted slice would
// have needed a second copy of everything (130 MiB) at each merge. A deleted entry of
// a run is marked dead in place (a prune deletes thousands) and dropped at the shard's
// next merge, which comes at once when half the run is dead.
//
// An entry holds a record's offset and size as uint32 and its pack and media type in
// 18 and 14 bits. A Store's own packs stop at packCap (64 MiB), so offsets fit with
// room to spare, and a judging run has a handful of media types; an object whose loc
// does not fit (a foreign pack past 4 GiB, a tenant's 262,143rd pack, the Store's
// 16,384th media type) goes to wide, a map of full locs, so nothing is ever truncated.
//
// objIndex is not safe for concurrent use: the Store guards it with imu (lookups under
// the read lock only read).
type objIndex struct {
	shards [256]shard
	wide   map[[32]byte]loc
	n      int
}

type shard struct {
	run []entry // sorted by key; may hold dead entries
	// fence is bytes 1-4 of the key of every fenceEvery-th entry of run: a lookup
	// finds the block in it (0.5 B an entry, few cache lines) and then reads one block
	// of the run, where a search of the run alone missed the cache at every probe.
	fence  []uint32
	recent []entry // sorted by key, never dead
	dead   int     // dead entries in run
}

// entry is one packed object: 44 bytes (alignment 4).
type entry struct {
	key  [32]byte
	off  uint32
	size uint32
	pm   uint32 // pack<<mtBits | media type; deadPM for a deleted entry of a run
}

const (
	mtBits  = 14
	maxPack = 1<<(32-mtBits) - 2 // the all-ones pack stays free for deadPM
	deadPM  = math.MaxUint32
	// minRecent is the fewest recent entries a shard merges: small runs are cheap to
	// copy, but not so cheap that each insert should pay for one.
	minRecent = 64
	// fenceEvery is the entries of a run per fence: a block of 8 is 352 B, six cache
	// lines, searched in three probes.
	fenceEvery = 8
)

func fits(l loc) bool {
	return l.off >= 0 && l.off <= math.MaxUint32 && l.pack <= maxPack && l.mt < 1<<mtBits
}

func mkEntry(key [32]byte, l loc) entry {
	return entry{key: key, off: uint32(l.off), size: l.size, pm: l.pack<<mtBits | l.mt}
}

func (e *entry) loc() loc {
	return loc{off: int64(e.off), size: e.size, pack: e.pm >> mtBits, mt: e.pm & (1<<mtBits - 1)}
}

// search returns where key is or would be in es (a shard's recent slice), and whether
// it is there. Digests are uniform, so it interpolates first: a guess from the key's
// first 8 bytes lands within a few entries of the key, in fewer cache lines than a
// binary search probes. The guesses are bounded, so keys that are not uniform (a
// foreign pack's records are not verified until read) cost a binary search at most.
func search(es []entry, key *[32]byte) (int, bool) {
	lo, hi := 0, len(es)
	if hi == 0 {
		return 0, false
	}
	// The first guess spans the keys of the shard (one first byte), which costs no
	// read; the later ones span the entries probed on either side.
	kp := binary.BigEndian.Uint64(key[:8])
	lv := kp &^ (1<<56 - 1)
	hv := lv | (1<<56 - 1)
	for range 6 {
		if hi-lo < 8 || hv <= lv || kp < lv || kp > hv {
			break
		}
		pos := lo + int(float64(kp-lv)/float64(hv-lv)*float64(hi-lo-1))
		pos = min(max(pos, lo), hi-1)
		switch c := cmpKey(&es[pos].key, key); {
		case c == 0:
			return pos, true
		case c < 0:
			lo, lv = pos+1, binary.BigEndian.Uint64(es[pos].key[:8])
		default:
			hi, hv = pos, binary.BigEndian.Uint64(es[pos].key[:8])
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmpKey(&es[m].key, key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(es) && es[lo].key == *key
}

// find returns where key is or would be in the shard's run, and whether it is there:
// the fences name the block (or, where fences tie, the blocks) that can hold it.
func (sh *shard) find(key *[32]byte) (int, bool) {
	if len(sh.fence) == 0 {
		return 0, false // no run
	}
	p := binary.BigEndian.Uint32(key[1:5])
	lb, ub := lowerBound(sh.fence, p), len(sh.fence)
	if p < math.MaxUint32 && lb < ub && sh.fence[lb] == p { // ties: crafted keys, or 1 in 2^32
		ub = lb + lowerBound(sh.fence[lb:], p+1)
	} else {
		ub = lb
	}
	// Entries before block lb-1 are below fence[lb-1] < p, so below key; entries from
	// block ub on are at or above fence[ub] > p, so above it.
	lo := max(lb-1, 0) * fenceEvery
	hi := min(ub*fenceEvery, len(sh.run))
	es := sh.run[lo:hi]
	i, j := 0, len(es)
	for i < j {
		m := int(uint(i+j) >> 1)
		if cmpKey(&es[m].key, key) < 0 {
			i = m + 1
		} else {
			j = m
		}
	}
	return lo + i, i < len(es) && es[i].key == *key
}

// lowerBound returns the first index of fs, sorted, whose value is p or more. The
// fences are uniform as the digests are, so it interpolates first, a bounded number
// of times.
func lowerBound(fs []uint32, p uint32) int {
	lo, hi := 0, len(fs)
	lv, hv := uint64(0), uint64(1<<32)
	for range 4 {
		if hi-lo < 16 || hv <= lv {
			break
		}
		pos := lo + int(float64(uint64(p)-lv)/float64(hv-lv)*float64(hi-lo))
		pos = min(max(pos, lo), hi-1)
		if fs[pos] < p {
			lo, lv = pos+1, uint64(fs[pos])
		} else {
			hi, hv = pos, uint64(fs[pos])
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if fs[m] < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// cmpKey orders keys as bytes.Compare does, a word at a time.
func cmpKey(a, b *[32]byte) int {
	for i := 0; i < 32; i += 8 {
		x, y := binary.BigEndian.Uint64(a[i:]), binary.BigEndian.Uint64(b[i:])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// len is the number of objects indexed.
func (x *objIndex) len() int { return x.n }

// get returns key's location.
func (x *objIndex) get(key [32]byte) (loc, bool) {
	sh := &x.shards[key[0]]
	if i, ok := sh.find(&key); ok && sh.run[i].pm != deadPM {
		return sh.run[i].loc(), true
	}
	if i, ok := search(sh.recent, &key); ok {
		return sh.recent[i].loc(), true
	}
	if len(x.wide) > 0 {
		l, ok := x.wide[key]
		return l, ok
	}
	return loc{}, false
}

// put points key at l and returns the location it replaces, if any.
func (x *objIndex) put(key [32]byte, l loc) (old loc, replaced bool) {
	sh := &x.shards[key[0]]
	ri, inRun := sh.find(&key)
	if inRun && sh.run[ri].pm != deadPM {
		old = sh.run[ri].loc()
		if fits(l) {
			sh.run[ri] = mkEntry(key, l)
		} else {
			sh.run[ri].pm = deadPM
			sh.dead++
			x.setWide(key, l)
		}
		return old, true
	}
	ci, inRecent := search(sh.recent, &key)
	if inRecent {
		old = sh.recent[ci].loc()
		if fits(l) {
			sh.recent[ci] = mkEntry(key, l)
		} else {
			sh.recent = slices.Delete(sh.recent, ci, ci+1)
			x.setWide(key, l)
		}
		return old, true
	}
	if w, ok := x.wide[key]; ok {
		old, replaced = w, true
		if !fits(l) {
			x.wide[key] = l
			return old, true
		}
		delete(x.wide, key)
	} else {
		x.n++
	}
	switch {
	case !fits(l):
		x.setWide(key, l)
	case inRun: // dead: revive it in place
		sh.run[ri] = mkEntry(key, l)
		sh.dead--
	default:
		sh.recent = slices.Insert(sh.recent, ci, mkEntry(key, l))
		if len(sh.recent) >= recentLimit(len(sh.run)) {
			sh.merge()
		}
	}
	return old, replaced
}

func (x *objIndex) setWide(key [32]byte, l loc) {
	if x.wide == nil {
		x.wide = map[[32]byte]loc{}
	}
	x.wide[key] = l
}

// del drops key and returns the location it had.
func (x *objIndex) del(key [32]byte) (loc, bool) {
	sh := &x.shards[key[0]]
	if i, ok := sh.find(&key); ok && sh.run[i].pm != deadPM {
		l := sh.run[i].loc()
		sh.run[i].pm = deadPM
		sh.dead++
		x.n--
		if sh.dead > len(sh.run)/2 {
			sh.merge() // a prune that empties a shard gives its memory back
		}
		return l, true
	}
	if i, ok := search(sh.recent, &key); ok {
		l := sh.recent[i].loc()
		sh.recent = slices.Delete(sh.recent, i, i+1)
		x.n--
		return l, true
	}
	if l, ok := x.wide[key]; ok {
		delete(x.wide, key)
		x.n--
		return l, true
	}
	return loc{}, false
}

// each calls fn with every indexed object, in no particular order.
func (x *objIndex) each(fn func(key [32]byte, l loc)) {
	for s := range x.shards {
		sh := &x.shards[s]
		for i := range sh.run {
			if sh.run[i].pm != deadPM {
				fn(sh.run[i].key, sh.run[i].loc())
			}
		}
		for i := range sh.recent {
			fn(sh.recent[i].key, sh.recent[i].loc())
		}
	}
	for k, l := range x.wide {
		fn(k, l)
	}
}

// recentLimit is how many recent entries a shard with a run of n merges: about √(2n),
// which balances moving half the recent slice per insert against copying the run once
// per that many inserts.
func recentLimit(n int) int {
	return max(minRecent, int(math.Sqrt(float64(2*n))))
}

// merge folds the recent entries into a new run of exactly the live entries, leaving
// the dead ones out. The run's stretches between recent entries are copied whole.
func (sh *shard) merge() {
	run := make([]entry, 0, len(sh.run)-sh.dead+len(sh.recent))
	i := 0
	for j := range sh.recent {
		// A forward scan, not a search per recent entry: the stretch it passes is
		// copied next anyway, so it reads no line the copy would not.
		k := i
		for k < len(sh.run) && cmpKey(&sh.run[k].key, &sh.recent[j].key) < 0 {
			k++
		}
		run = sh.appendLive(run, sh.run[i:k])
		run = append(run, sh.recent[j])
		i = k
	}
	run = sh.appendLive(run, sh.run[i:])
	var fence []uint32
	if len(run) == 0 {
		run = nil
	} else {
		fence = make([]uint32, (len(run)+fenceEvery-1)/fenceEvery)
		for b := range fence {
			fence[b] = binary.BigEndian.Uint32(run[b*fenceEvery].key[1:5])
		}
	}
	sh.run, sh.fence, sh.dead = run, fence, 0
	// The recent slice keeps its capacity for the next round: a shard's limit grows
	// slowly (with the root of its run), so it is reused rather than reallocated.
	sh.recent = sh.recent[:0]
}

// appendLive appends the live entries of src, a stretch of the shard's run, to dst.
func (sh *shard) appendLive(dst, src []entry) []entry {
	if sh.dead == 0 {
		return append(dst, src...)
	}
	for i := range src {
		if src[i].pm != deadPM {
			dst = append(dst, src[i])
		}
	}
	return dst
}
