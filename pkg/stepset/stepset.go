// Package stepset holds a fixed-size value under a 16-byte key for more keys than the
// heap should hold: the audit keeps an entry for every logical step of every event it
// replays (about six a job), and at 1,000,000 jobs a map of them held hundreds of MB.
//
// A Set keeps the newest entries in a hot table in memory, of a fixed size. When the
// table is full its entries are sorted and written to a temporary file (a run), and the
// heap keeps of the run only a bloom filter (about 10 bits an entry in the smallest runs,
// fewer in larger ones: see falsePositive) and the first key of every page of 128 entries
// (fences: 1/8 of a byte an entry). A lookup tries the hot table,
// then each run, newest first, whose bloom filter may hold the key: it finds the page by
// the fences and reads that one page. Replacing a value of a run's entry writes it in
// place in the file. Runs are merged, four of a size into one, so a lookup reads few
// filters whatever the count. Nothing is ever dropped: every entry put stays readable
// for the Set's lifetime.
//
// A Set is not safe for concurrent use.
package stepset

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"sort"

	"github.com/bits-and-blooms/bloom/v3"
)

// Key is what an entry is found by.
type Key [16]byte

// Value is what an entry of a Set holds: two words the caller gives their meaning.
type Value [2]uint64

// Wide is what an entry of an Of[Wide] holds: four words, a whole SHA-256 for one.
type Wide [4]uint64

// Words are the values a set holds: a fixed number of words. A table that needs more
// than two words a key takes a wider value rather than a second set of the same keys,
// whose filter and fences would be the heap's twice over.
type Words interface{ ~[2]uint64 | ~[4]uint64 }

// Set is the set of two-word values, the common one.
type Set = Of[Value]

const (
	// keySize is the start of an entry in a run, its key; the value's words follow,
	// little-endian (an entry of a Set is 32 bytes).
	keySize = 16
	// pageEntries entries make a page (4 KiB of a Set), what one lookup in a run reads.
	pageEntries = 128
	// HotSlots is the hot table's size, in entries, past which it spills (at 3/4 full:
	// 196,608 entries): 8 MiB, a constant of the audit whatever the batch (2 % of the
	// 100,000-AC audit's heap). The audit's lookups are of recent events (a chain names
	// its job's render request, render and gates, recorded just before; an output is
	// claimed as it is recorded; a duplicate is looked up, and missed, as it comes), so a
	// table holding the steps of some 30,000 jobs serves nearly all of them from memory
	// while the jobs in flight are far fewer; a larger table buys little and costs every
	// audit, a smaller one writes more runs (a run every 196,608 steps: about 30 for a
	// 1,000,000-AC batch, merged into at most 3 of each size).
	HotSlots = 1 << 18
	// minSlots is the hot table's size when it starts: a small audit allocates little.
	minSlots = 1 << 10
	// fanout runs of one size are merged into one.
	fanout = 4
	// falsePositive is the rate at which the filter of a run the size of one spill (the
	// hot table's 3/4) sends a lookup of a key the run does not hold to read a page. A
	// larger run's rate grows with its size, up to maxFalsePositive: 4 % for a run of
	// four spills, 16 % for sixteen. A lookup of a new key (most of the audit's: a step
	// is looked up as it comes, to find a duplicate) tests every run, so what it reads
	// in vain is the sum of the runs' rates; for a given heap that sum is least when
	// each run's rate is in proportion to its size (Dayan et al., "Monkey: Optimal
	// Navigable Key-Value Store", 2017), and the largest runs, which hold most entries,
	// cost the fewest bits an entry: 3.8 at 16 %, where 1 % is 9.6. At 1,000,000 ACs the
	// audit's tables hold about 12 entries a job, their largest runs 3,000,000 entries,
	// and their filters took 18 MB at 1 % each; a lookup of a new key reads about a
	// third of a page in vain, from the page cache, some 1.5 µs.
	falsePositive    = 0.01
	maxFalsePositive = 0.5
	// ioBuffer is the buffer of a run being written or read whole (a merge).
	ioBuffer = 64 << 10
)

// entry is a slot of the hot table.
type entry[V Words] struct {
	k Key
	v V
}

// Of holds entries by key. Its zero value is not usable: see New and NewOf.
type Of[V Words] struct {
	dir string
	// es is an entry's size in a run.
	es int
	// maxSlots is the hot table's size past which it spills (HotSlots; tests lower it).
	maxSlots int
	seed     maphash.Seed

	// slots is the hot table (open addressing, linear probing, no deletions); used
	// marks its occupied slots, hot counts them.
	slots []entry[V]
	used  []uint64
	hot   int

	// runs are the entries written out, oldest first; files are their open files.
	runs  []*run
	files *files
	// inMemory is set once a run could not be written: the hot table grows from then on.
	inMemory bool
	// noMerge is set once a merge failed: the runs stay as they are.
	noMerge bool

	n int
	// last is where the last lookup in the runs found its key (or did not), for the put
	// that usually follows it.
	last struct {
		valid, found bool
		k            Key
		r            *run
		i            int
		v            V
	}
	kb   Key
	page []byte
	// reads counts the pages read by lookups (tests).
	reads int
}

// run is a sorted file of entries.
type run struct {
	f *os.File
	// es is the size of its entries.
	es     int
	n      int
	level  int
	filter *bloom.BloomFilter
	// fences are the first key of each page.
	fences []Key
}

// files are the open run files, closed (and removed, where an open file could not be)
// when the Set is collected or closed.
type files struct {
	open    map[*os.File]bool
	pending map[*os.File]string
}

func (fs *files) close(f *os.File) {
	f.Close()
	if name, ok := fs.pending[f]; ok {
		os.Remove(name)
		delete(fs.pending, f)
	}
	delete(fs.open, f)
}

func (fs *files) closeAll() {
	for f := range fs.open {
		fs.close(f)
	}
}

// New starts an empty Set that writes its runs to temporary files in dir ("": it keeps
// every entry in memory). A file is removed as soon as it is created (where an open file
// can be; else when it is closed) and closed when merged away, when the Set is closed or
// collected.
func New(dir string) *Set {
	return NewSized(dir, HotSlots)
}

// NewSized is New with a hot table of at most slots entries (rounded up to a power of
// two), for tests that make a few entries spread over many runs.
func NewSized(dir string, slots int) *Set {
	return NewOf[Value](dir, slots)
}

// NewOf is NewSized for a set of any width of value.
func NewOf[V Words](dir string, slots int) *Of[V] {
	maxSlots := 1 << bits.Len(uint(max(slots, 2)-1))
	var v V
	es := keySize + 8*len(v)
	s := &Of[V]{dir: dir, es: es, maxSlots: maxSlots, seed: maphash.MakeSeed(), page: make([]byte, pageEntries*es),
		files: &files{open: map[*os.File]bool{}, pending: map[*os.File]string{}}}
	runtime.AddCleanup(s, (*files).closeAll, s.files)
	s.resize(min(minSlots, maxSlots))
	return s
}

// Len is how many entries the Set holds.
func (s *Of[V]) Len() int { return s.n }

// Runs is how many runs its entries are spread over besides the hot table.
func (s *Of[V]) Runs() int { return len(s.runs) }

// Close closes the Set's files; it is not used after.
func (s *Of[V]) Close() {
	s.files.closeAll()
	s.runs = nil
}

// Get returns the value put under k.
func (s *Of[V]) Get(k Key) (V, bool) {
	if i, ok := s.slot(k); ok {
		return s.slots[i].v, true
	}
	if !s.find(k) {
		var zero V
		return zero, false
	}
	return s.last.v, true
}

// Put puts v under k, in place of the value k had.
func (s *Of[V]) Put(k Key, v V) {
	i, ok := s.slot(k)
	if ok {
		s.slots[i].v = v
		return
	}
	cold := s.find(k)
	if cold && s.rewrite(v) {
		return
	}
	// New, or a run's entry that could not be written in place: the hot table's copy,
	// newer, is the one read.
	s.slots[i] = entry[V]{k, v}
	s.used[i/64] |= 1 << (i % 64)
	s.hot++
	if !cold {
		s.n++
	}
	if s.hot > len(s.slots)/4*3 {
		if len(s.slots) < s.maxSlots || s.dir == "" || s.inMemory {
			s.resize(2 * len(s.slots))
		} else {
			s.spill()
		}
	}
}

// slot is where k is in the hot table, or the free slot it would take.
func (s *Of[V]) slot(k Key) (int, bool) {
	mask := len(s.slots) - 1
	i := int(maphash.Comparable(s.seed, k)) & mask
	for {
		if s.used[i/64]&(1<<(i%64)) == 0 {
			return i, false
		}
		if s.slots[i].k == k {
			return i, true
		}
		i = (i + 1) & mask
	}
}

// resize moves the hot table's entries into a table of n slots.
func (s *Of[V]) resize(n int) {
	old, oldUsed := s.slots, s.used
	s.slots, s.used = make([]entry[V], n), make([]uint64, (n+63)/64)
	for i := range old {
		if oldUsed[i/64]&(1<<(i%64)) != 0 {
			j, _ := s.slot(old[i].k)
			s.slots[j] = old[i]
			s.used[j/64] |= 1 << (j % 64)
		}
	}
}

// find looks k up in the runs, newest first, and leaves what it found in s.last: the
// run holding it, its index there and its value.
func (s *Of[V]) find(k Key) bool {
	if s.last.valid && s.last.k == k {
		return s.last.found
	}
	s.last.valid, s.last.found, s.last.k, s.last.r = true, false, k, nil
	s.kb = k // a slice of a local would escape to the heap at every lookup
	for ri := len(s.runs) - 1; ri >= 0; ri-- {
		r := s.runs[ri]
		if !r.filter.Test(s.kb[:]) {
			continue
		}
		s.reads++
		if i, e, ok := r.search(k, s.page); ok {
			s.last.found, s.last.r, s.last.i, s.last.v = true, r, i, decode[V](e)
			return true
		}
	}
	return false
}

func compareKeys(a, b Key) int { return bytes.Compare(a[:], b[:]) }

// decode reads a value from the words after an entry's key.
func decode[V Words](e []byte) V {
	var v V
	for i := range len(v) {
		v[i] = binary.LittleEndian.Uint64(e[keySize+8*i:])
	}
	return v
}

// encode writes v's words into b.
func encode[V Words](b []byte, v V) {
	for i := range len(v) {
		binary.LittleEndian.PutUint64(b[8*i:], v[i])
	}
}

// search finds k in r by its fences and one page read: its index and its entry's bytes
// (in buf).
func (r *run) search(k Key, buf []byte) (int, []byte, bool) {
	p := sort.Search(len(r.fences), func(i int) bool { return compareKeys(r.fences[i], k) > 0 }) - 1
	if p < 0 {
		return 0, nil, false
	}
	first := p * pageEntries
	n := min(pageEntries, r.n-first)
	es := r.es
	b := buf[:n*es]
	if _, err := r.f.ReadAt(b, int64(first*es)); err != nil {
		// The file is the Set's own, written by it: a failed read is a broken machine,
		// not bad input.
		panic(fmt.Sprintf("stepset: a run in %s does not read back: %v", r.f.Name(), err))
	}
	j := sort.Search(n, func(j int) bool { return bytes.Compare(b[j*es:j*es+keySize], k[:]) >= 0 })
	if j == n || !bytes.Equal(b[j*es:j*es+keySize], k[:]) {
		return 0, nil, false
	}
	return first + j, b[j*es : (j+1)*es], true
}

// rewrite writes v over the value of the run's entry find found last; false when the
// file does not take it.
func (s *Of[V]) rewrite(v V) bool {
	b := s.page[:s.es-keySize] // the page was read for the lookup, and is read again for the next
	encode(b, v)
	r := s.last.r
	if _, err := r.f.WriteAt(b, int64(s.last.i*s.es+keySize)); err != nil {
		slog.Warn("stepset: an entry kept in memory: its run does not take the new value", "file", r.f.Name(), "err", err)
		return false
	}
	s.last.v = v
	return true
}

// spill writes the hot table, sorted, as a new run and empties it, then merges runs of
// one size.
func (s *Of[V]) spill() {
	w := 0
	for i := range s.slots {
		if s.used[i/64]&(1<<(i%64)) != 0 {
			s.slots[w] = s.slots[i]
			w++
		}
	}
	sorted := s.slots[:w]
	slices.SortFunc(sorted, func(a, b entry[V]) int { return compareKeys(a.k, b.k) })
	rw, err := s.create(w)
	if err == nil {
		b := rw.buf
		for _, e := range sorted {
			copy(b, e.k[:])
			encode(b[keySize:], e.v)
			if err = rw.add(b); err != nil {
				break
			}
		}
	}
	var r *run
	if err == nil {
		r, err = rw.finish()
	}
	if err != nil {
		if rw != nil {
			s.files.close(rw.f)
		}
		slog.Warn("stepset: entries kept in memory from now on: no run file", "dir", s.dir, "err", err)
		s.inMemory = true
		// The table's entries are the sorted prefix now: the table is made again of them.
		clear(s.used)
		for i := range w {
			s.used[i/64] |= 1 << (i % 64)
		}
		s.resize(2 * len(s.slots))
		return
	}
	s.runs = append(s.runs, r)
	clear(s.used)
	s.hot = 0
	s.last.valid = false
	s.merge()
}

// merge merges the newest runs while fanout of them are of one size.
func (s *Of[V]) merge() {
	for !s.noMerge && len(s.runs) >= fanout {
		tail := s.runs[len(s.runs)-fanout:]
		if tail[0].level != tail[fanout-1].level {
			return
		}
		r, err := s.mergeRuns(tail)
		if err != nil {
			slog.Warn("stepset: runs left unmerged from now on: the merge failed", "dir", s.dir, "err", err)
			s.noMerge = true
			return
		}
		for _, old := range tail {
			s.files.close(old.f)
		}
		s.runs = append(s.runs[:len(s.runs)-fanout], r)
		s.last.valid = false
	}
}

// mergeRuns writes the entries of rs (oldest first) as one run: a key in two of them
// (a value that could not be written in place) keeps the newest's value.
func (s *Of[V]) mergeRuns(rs []*run) (*run, error) {
	total := 0
	for _, r := range rs {
		total += r.n
	}
	rw, err := s.create(total)
	if err != nil {
		return nil, err
	}
	// A cursor holds its run's next entry (e, when ok) and how many are left unread.
	type cursor struct {
		rd   *bufio.Reader
		left int
		ok   bool
		e    []byte
	}
	cs := make([]*cursor, len(rs))
	advance := func(i int) error {
		c := cs[i]
		if c.ok = c.left > 0; !c.ok {
			return nil
		}
		c.left--
		if _, err := io.ReadFull(c.rd, c.e); err != nil {
			return fmt.Errorf("stepset: read run %s: %w", rs[i].f.Name(), err)
		}
		return nil
	}
	fail := func(err error) (*run, error) {
		s.files.close(rw.f)
		return nil, err
	}
	for i, r := range rs {
		cs[i] = &cursor{rd: bufio.NewReaderSize(io.NewSectionReader(r.f, 0, int64(r.n*s.es)), ioBuffer), left: r.n, e: make([]byte, s.es)}
		if err := advance(i); err != nil {
			return fail(err)
		}
	}
	for {
		best := -1
		for i, c := range cs {
			// Ties go to the newer run, the later one.
			if c.ok && (best < 0 || bytes.Compare(c.e[:keySize], cs[best].e[:keySize]) <= 0) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		var k Key
		copy(k[:], cs[best].e[:keySize])
		if err := rw.add(cs[best].e); err != nil {
			return fail(err)
		}
		for i, c := range cs {
			if c.ok && bytes.Equal(c.e[:keySize], k[:]) {
				if err := advance(i); err != nil {
					return fail(err)
				}
			}
		}
	}
	r, err := rw.finish()
	if err != nil {
		s.files.close(rw.f)
		return nil, err
	}
	r.level = rs[0].level + 1
	return r, nil
}

// falsePositive is the rate of the filter of a run of n entries.
func (s *Of[V]) falsePositive(n int) float64 {
	spill := s.maxSlots / 4 * 3
	return min(maxFalsePositive, max(falsePositive, falsePositive*float64(n)/float64(max(spill, 1))))
}

// runWriter writes a run in key order.
type runWriter struct {
	r *run
	f *os.File
	w *bufio.Writer
	// buf is an entry's bytes, the writer's own: a local's slice would escape at every
	// entry.
	buf []byte
}

// create starts a run of at most n entries in a new file.
func (s *Of[V]) create(n int) (*runWriter, error) {
	f, err := os.CreateTemp(s.dir, "tribunal-steps-*")
	if err != nil {
		return nil, fmt.Errorf("stepset: run file: %w", err)
	}
	s.files.open[f] = true
	if os.Remove(f.Name()) != nil {
		s.files.pending[f] = f.Name()
	}
	m, k := bloom.EstimateParameters(uint(max(n, 1)), s.falsePositive(n))
	return &runWriter{
		r: &run{f: f, es: s.es, filter: bloom.New(m, k), fences: make([]Key, 0, (n+pageEntries-1)/pageEntries)},
		f: f, w: bufio.NewWriterSize(f, ioBuffer), buf: make([]byte, s.es),
	}, nil
}

// add writes an entry, its key then its value's words, after the last (in key order).
func (rw *runWriter) add(e []byte) error {
	r := rw.r
	if r.n%pageEntries == 0 {
		r.fences = append(r.fences, Key(e[:keySize]))
	}
	r.filter.Add(e[:keySize])
	r.n++
	if _, err := rw.w.Write(e); err != nil {
		return fmt.Errorf("stepset: write run %s: %w", rw.f.Name(), err)
	}
	return nil
}

func (rw *runWriter) finish() (*run, error) {
	if err := rw.w.Flush(); err != nil {
		return nil, fmt.Errorf("stepset: write run %s: %w", rw.f.Name(), err)
	}
	rw.r.fences = slices.Clip(rw.r.fences)
	return rw.r, nil
}
