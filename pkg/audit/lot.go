package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/stepset"
)

// A lot holds records that wait by a step key until they are taken, more of them than
// the heap should hold: the expectations whose output the stream has not recorded yet
// (auditor.waiting) and the outputs recorded before their expectation (auditor.early).
// A fast client runs a whole batch ahead of its judges, so at 1,000,000 jobs hundreds of
// thousands wait at once; a map by id string of them held 265 MB.
//
// The records are appended to a log. Its newest part, up to budget bytes, is in memory;
// when that is full it is written out as a segment, a temporary file removed at once, and
// a segment whose records were all taken is closed (its disk freed): records are mostly
// taken in about the order they were put, so what is on disk follows what waits. A part
// whose records were all taken while in memory is never written. The index from key to
// record is a stepset (a fixed hot table, then runs of about 1.5 bytes an entry), its
// value the record's place in the log, its length and type: no pointer, no string.
//
// Records under one key are told apart by a derived key each (the second and later,
// rare: an id expected twice); the base key's value counts them.
type lot struct {
	dir    string
	budget int
	index  *stepset.Set
	// buf is the log from base on, in memory; live counts its records not taken.
	buf  []byte
	base uint64
	live int
	segs []*segment
	// files are the segments' open files, closed when the lot is closed or collected.
	files *segmentFiles
	// inMemory is set once a segment could not be written: the log stays in memory.
	inMemory bool
	n        int
}

// segment is a part of the log written out: [start, end) in the log.
type segment struct {
	f          *os.File
	start, end uint64
	live       int
}

type segmentFiles struct{ open map[*os.File]bool }

func (fs *segmentFiles) closeAll() {
	for f := range fs.open {
		f.Close()
		delete(fs.open, f)
	}
}

// A record in the log: its length (4 bytes, little-endian, the header included), a flag
// byte (1: taken), its sort sequence (little-endian), then the caller's bytes.
const (
	recordHeader = 4 + 1 + 8
	flagAt       = 4
)

// A record's value in the index: its place in the log plus one (0: taken), and its
// length (32 bits), its count of records under the key (the base key only, 24 bits) and
// its type (8 bits).
func lotValue(at uint64, n, count int, typ uint8) stepset.Value {
	return stepset.Value{at + 1, uint64(n)<<32 | uint64(count)<<8 | uint64(typ)}
}

func unpackLot(v stepset.Value) (at uint64, taken bool, n, count int, typ uint8) {
	return v[0] - 1, v[0] == 0, int(v[1] >> 32), int(v[1]>>8) & (1<<24 - 1), uint8(v[1])
}

// lotSlots is the size of a lot's index hot table (1 MiB at 3/4 full), and lotBudget of
// its log's part in memory: tests lower them.
var (
	lotSlots  = 1 << 15
	lotBudget = 8 << 20
)

// newLot starts an empty lot writing its segments and index runs in dir ("": all in
// memory).
func newLot(dir string) *lot {
	l := &lot{dir: dir, budget: lotBudget, index: stepset.NewSized(dir, lotSlots), files: &segmentFiles{open: map[*os.File]bool{}}}
	runtime.AddCleanup(l, (*segmentFiles).closeAll, l.files)
	return l
}

// len is how many records wait.
func (l *lot) len() int { return l.n }

// derived is the key of the i-th record (from 0) put under k.
func derived(k stepKey, i int) stepset.Key {
	if i == 0 {
		return stepset.Key(k)
	}
	var b [16 + 8]byte
	copy(b[:], k[:])
	binary.LittleEndian.PutUint64(b[16:], uint64(i))
	sum := sha256.Sum256(b[:])
	return stepset.Key(sum[:16])
}

// put adds a record under k, of type typ, sorted by seq in each.
func (l *lot) put(k stepKey, typ uint8, seq uint64, data []byte) {
	at := l.base + uint64(len(l.buf))
	l.buf = binary.LittleEndian.AppendUint32(l.buf, uint32(recordHeader+len(data)))
	l.buf = append(l.buf, 0)
	l.buf = binary.LittleEndian.AppendUint64(l.buf, seq)
	l.buf = append(l.buf, data...)
	l.live++
	l.n++
	n := recordHeader + len(data)
	base := stepset.Key(k)
	if v, ok := l.index.Get(base); ok {
		bat, btaken, bn, count, btyp := unpackLot(v)
		if btaken {
			bat = ^uint64(0) // stays taken: at+1 wraps to 0
		}
		l.index.Put(derived(k, count), lotValue(at, n, 0, typ))
		l.index.Put(base, lotValue(bat, bn, count+1, btyp))
	} else {
		l.index.Put(base, lotValue(at, n, 1, typ))
	}
	if len(l.buf) >= l.budget && !l.inMemory {
		l.spill()
	}
}

// take removes and returns the first record put under k of type typ, not taken yet, that
// is (a key is the raw bytes of a hex id, or a hash of another: is checks the record's
// own id).
func (l *lot) take(k stepKey, typ uint8, is func([]byte) bool) ([]byte, bool) {
	v, ok := l.index.Get(stepset.Key(k))
	if !ok {
		return nil, false
	}
	_, _, _, count, _ := unpackLot(v)
	for i := range count {
		dk := derived(k, i)
		if i > 0 {
			if v, ok = l.index.Get(dk); !ok {
				continue
			}
		}
		at, taken, n, _, t := unpackLot(v)
		if taken || t != typ {
			continue
		}
		rec := l.read(at, n)
		if !is(rec[recordHeader:]) {
			continue
		}
		l.mark(at)
		v[0] = 0
		l.index.Put(dk, v)
		l.n--
		return rec[recordHeader:], true
	}
	return nil, false
}

// read returns the record at at of n bytes (a copy when on disk).
func (l *lot) read(at uint64, n int) []byte {
	if at >= l.base {
		return slices.Clone(l.buf[at-l.base : at-l.base+uint64(n)])
	}
	s := l.segment(at)
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, int64(at-s.start)); err != nil {
		// The lot's own file, written by it: a failed read is a broken machine.
		panic(fmt.Sprintf("audit: a waiting record in %s does not read back: %v", s.f.Name(), err))
	}
	return b
}

func (l *lot) segment(at uint64) *segment {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end > at })
	return l.segs[i]
}

// mark marks the record at at taken, closing its segment once none of its records waits.
func (l *lot) mark(at uint64) {
	if at >= l.base {
		l.buf[at-l.base+flagAt] = 1
		l.live--
		return
	}
	s := l.segment(at)
	if _, err := s.f.WriteAt([]byte{1}, int64(at-s.start)+flagAt); err != nil {
		panic(fmt.Sprintf("audit: a waiting record in %s does not take its mark: %v", s.f.Name(), err))
	}
	if s.live--; s.live == 0 {
		s.f.Close()
		delete(l.files.open, s.f)
		s.f = nil
	}
}

// spill writes the log's part in memory out as a segment; one none of whose records
// waits is dropped instead.
func (l *lot) spill() {
	end := l.base + uint64(len(l.buf))
	if l.live > 0 {
		f, err := os.CreateTemp(l.dir, "tribunal-waiting-*")
		if err == nil {
			os.Remove(f.Name())
			l.files.open[f] = true
			if _, err = f.WriteAt(l.buf, 0); err != nil {
				f.Close()
				delete(l.files.open, f)
			}
		}
		if err != nil {
			slog.Warn("audit: waiting records kept in memory from now on: no segment file", "dir", l.dir, "err", err)
			l.inMemory = true
			return
		}
		l.segs = append(l.segs, &segment{f: f, start: l.base, end: end, live: l.live})
	}
	l.base, l.buf, l.live = end, l.buf[:0], 0
	// The segments all taken go from the list too: a lookup never lands in one.
	kept := l.segs[:0]
	for _, s := range l.segs {
		if s.f != nil {
			kept = append(kept, s)
		}
	}
	l.segs = kept
}

// each calls fn with every record not taken, by its sort sequence (ties in the order
// put), through a spilling sort: as many may wait at the end as at the peak.
func (l *lot) each(fn func(data []byte) error) error {
	if l.n == 0 {
		return nil
	}
	s := spillsort.New(nil)
	s.Dir = l.dir
	defer s.Close()
	var key [8]byte
	add := func(log []byte) {
		for i := 0; i < len(log); {
			rec := log[i : i+int(binary.LittleEndian.Uint32(log[i:]))]
			if rec[flagAt] == 0 {
				binary.BigEndian.PutUint64(key[:], binary.LittleEndian.Uint64(rec[flagAt+1:]))
				s.Add(key[:], rec[recordHeader:])
			}
			i += len(rec)
		}
	}
	var b []byte
	for _, seg := range l.segs {
		if seg.f == nil {
			continue
		}
		b = slices.Grow(b[:0], int(seg.end-seg.start))[:seg.end-seg.start]
		if _, err := seg.f.ReadAt(b, 0); err != nil {
			return fmt.Errorf("audit: read waiting records in %s: %w", seg.f.Name(), err)
		}
		add(b)
	}
	add(l.buf)
	return s.Each(func(_, val []byte) error { return fn(val) })
}

// close lets go of the lot's files.
func (l *lot) close() {
	l.files.closeAll()
	l.index.Close()
	l.segs, l.buf = nil, nil
}
