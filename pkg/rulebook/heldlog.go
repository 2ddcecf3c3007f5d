package rulebook

import (
	"encoding/binary"
	"fmt"
)

// defaultHeldBudget is how many bytes of the records in flight (stored, not final) a
// Memory with a spill file holds in memory; past it the least recently written go to
// the file and are read back by offset when a rule touches them again. A job in flight
// is about 0.5 KB compressed (its key beside it), so 32 MiB holds about 60,000 of them:
// more than a pipeline keeps in flight when its judges keep up (a window of a few
// thousand), so the 100,000-AC audit rarely reads one back, and a fixed share of the
// margin the 1,000,000-AC audit has over the 100,000-AC one (1.2 x about 420 MiB, issue
// 30), where a real 1,000,000-AC stream, its submitter far ahead of the judges, held
// 193 MB of them and growing. Reading one back costs a pread, a fraction of the zstd
// and JSON decoding every touch does anyway.
const defaultHeldBudget = 32 << 20

// heldSegments is how many pieces the budget is cut into: the oldest piece is written
// out at once, so an eviction's scan is sequential and what stays is the 7/8 most
// recently written.
const heldSegments = 8

// heldLog holds the records in flight of a Memory that has a spill file, without a
// pointer a job: each stored version appended to a segment of a fixed ring, as
// [place uint32][length uint32] and the spill file's own entry (its key's length, the
// key, the encoded record). Memory.at names the live version (heldWord); a version
// stored over, or made final, is left as garbage until its segment is reused. When the
// segment to write next is full the one after it, the oldest, is emptied: the versions
// still live there are appended to the spill file (their place's word moves to it, as
// for a final record), the rest dropped. The log never holds more than its budget
// (its segments' capacities), whatever the jobs in flight, and lets a segment go once
// none of its versions is live: a replay whose jobs are all final holds none of it.
type heldLog struct {
	segs [heldSegments][]byte
	// live counts each segment's live versions.
	live [heldSegments]int
	cur  int
	// segCap is a segment's most bytes: the budget over heldSegments.
	segCap int
	// evicting is set while a segment is emptied for reuse, which keeps its capacity.
	evicting bool
}

// keptEmpty is the most capacity the segment being written keeps once nothing in it is
// live: enough that a stream with few jobs in flight does not allocate at every job,
// little against the budget.
const keptEmpty = 64 << 10

const entryHeader = 8

// A held record's word in Memory.at: its top bit set (a spilled record's word leaves it
// clear: its offset stays under maxSpillEnd), its segment and its offset in it.
const heldBit = 1 << 63

func heldWord(seg, off int) uint64 { return heldBit | uint64(seg)<<32 | uint64(uint32(off)) }

func isHeld(w uint64) bool { return w&heldBit != 0 }

func unpackHeld(w uint64) (seg, off int) { return int(w>>32) & (heldSegments - 1), int(uint32(w)) }

// entryAt returns the place and spill-file entry of the version at off in seg.
func (l *heldLog) entryAt(seg, off int) (place uint32, entry []byte) {
	b := l.segs[seg][off:]
	place, n := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
	return place, b[entryHeader : entryHeader+int(n)]
}

// read returns the key and encoded record of the version w names, as the log holds them:
// they are overwritten once its segment is reused, so the caller uses them before the
// Memory stores anything.
func (l *heldLog) read(w uint64) (key, enc []byte) {
	_, entry := l.entryAt(unpackHeld(w))
	key, enc, ok := splitEntry(entry)
	if !ok {
		panic(fmt.Sprintf("rulebook: a job record held in memory at %#x is not as it was written", w))
	}
	return key, enc
}

// add appends key's record enc as the version of place p and returns its word; false
// when a segment cannot hold it (the caller holds it otherwise). A full log first empties
// its oldest segment with evict.
func (l *heldLog) add(p uint32, key string, enc []byte, evict func(seg int)) (uint64, bool) {
	n := binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(key))) + len(key) + len(enc)
	need := entryHeader + n
	if need > l.segCap {
		return 0, false
	}
	if len(l.segs[l.cur])+need > l.segCap {
		l.cur = (l.cur + 1) % heldSegments
		if len(l.segs[l.cur]) > 0 {
			l.evicting = true
			evict(l.cur)
			l.evicting = false
			l.segs[l.cur] = l.segs[l.cur][:0]
		}
	}
	s := l.segs[l.cur]
	if len(s)+need > cap(s) {
		// Grown by doubling up to segCap, so that a Memory with few jobs in flight holds
		// a little, and never past it.
		grown := make([]byte, len(s), min(max(2*cap(s), len(s)+need, 4<<10), l.segCap))
		copy(grown, s)
		s = grown
	}
	off := len(s)
	s = binary.LittleEndian.AppendUint32(s, p)
	s = binary.LittleEndian.AppendUint32(s, uint32(n))
	s = binary.AppendUvarint(s, uint64(len(key)))
	s = append(append(s, key...), enc...)
	l.segs[l.cur] = s
	l.live[l.cur]++
	return heldWord(l.cur, off), true
}

// drop is told that the version w names is no longer live (stored over, final, written
// out); a segment with none live left is let go.
func (l *heldLog) drop(w uint64) {
	seg, _ := unpackHeld(w)
	if l.live[seg]--; l.live[seg] > 0 || l.evicting {
		return
	}
	if seg == l.cur && cap(l.segs[seg]) <= keptEmpty {
		l.segs[seg] = l.segs[seg][:0]
		return
	}
	l.segs[seg] = nil
}

// each calls fn with the place, word and entry of every version in segment seg.
func (l *heldLog) each(seg int, fn func(p uint32, w uint64, entry []byte)) {
	s := l.segs[seg]
	for off := 0; off < len(s); {
		b := s[off:]
		p, n := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		fn(p, heldWord(seg, off), b[entryHeader:entryHeader+int(n)])
		off += entryHeader + int(n)
	}
}

// bytes is what the log's segments hold, garbage included, and their capacity.
func (l *heldLog) bytes() (used, capacity int) {
	for _, s := range l.segs {
		used, capacity = used+len(s), capacity+cap(s)
	}
	return used, capacity
}
