// Package spillsort sorts records too many to hold: a batch's completion lists a row per
// job in an order the jobs do not arrive in (batch order, AC order), and at 1,000,000
// jobs those rows are over a gigabyte. A Sorter keeps a bounded buffer of records,
// writes each full buffer sorted to a temporary file (a run) and merges the runs when
// read, so what it holds is the buffer and a cursor per run, not the records.
//
// The sort is stable: records that compare equal come out in the order they were added.
package spillsort

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
)

// DefaultBuffer is how many bytes of records a Sorter holds before it writes a run, when
// its Buffer is not set. Tests lower it to make small batches spill.
var DefaultBuffer = 8 << 20

// DefaultDir is where a Sorter whose Dir is not set writes its runs ("": os.TempDir()).
// A process sets it once, before its first sort (`tribunal serve --spill-dir`): the OS
// temp dir of a container is often a tmpfs, memory, which the runs are written out to
// spare.
var DefaultDir string

// readBuffer is each run's read buffer while runs are merged: 64 runs (a 1,000,000-job
// batch's ab rows at the default buffer) take 2 MiB.
const readBuffer = 32 << 10

// Sorter sorts records by key. Its zero value is not usable: see New.
type Sorter struct {
	less func(a, b []byte) bool
	// Dir is where runs are written ("": DefaultDir); Buffer how many bytes of records
	// are held before a run is written (0: DefaultBuffer). Set them before the first Add.
	Dir    string
	Buffer int

	arena []byte
	recs  []rec
	held  int
	n     int

	file *os.File
	end  int64
	runs []run
	// inMemory is set once a run could not be written: the records stay in memory.
	inMemory bool
}

type rec struct{ kOff, kLen, vLen int }

type run struct{ off, size int64 }

// New starts a sorter ordering keys by less (nil: bytes in order).
func New(less func(a, b []byte) bool) *Sorter {
	if less == nil {
		less = func(a, b []byte) bool { return string(a) < string(b) }
	}
	return &Sorter{less: less}
}

// Len is how many records were added.
func (s *Sorter) Len() int { return s.n }

// Runs is how many runs were written to the sorter's file.
func (s *Sorter) Runs() int { return len(s.runs) }

// written counts the bytes every Sorter wrote to its runs (Written).
var written atomic.Int64

// CheckDir says whether dir takes spill files: one is created there and removed.
func CheckDir(dir string) error {
	f, err := os.CreateTemp(dir, "tribunal-spill-check-*")
	if err != nil {
		return fmt.Errorf("spill dir %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// Written is how many bytes the sorters of this process wrote to their runs, for tests
// that a fold spilled what it was given.
func Written() int64 { return written.Load() }

// Add adds a record; key and val are copied.
func (s *Sorter) Add(key, val []byte) {
	off := len(s.arena)
	s.arena = append(append(s.arena, key...), val...)
	s.recs = append(s.recs, rec{off, len(key), len(val)})
	s.held += len(key) + len(val) + 24
	s.n++
	if s.held >= s.buffer() && !s.inMemory {
		s.spill()
	}
}

func (s *Sorter) buffer() int {
	if s.Buffer > 0 {
		return s.Buffer
	}
	return DefaultBuffer
}

func (s *Sorter) key(r rec) []byte { return s.arena[r.kOff : r.kOff+r.kLen] }
func (s *Sorter) val(r rec) []byte { return s.arena[r.kOff+r.kLen : r.kOff+r.kLen+r.vLen] }

func (s *Sorter) sortHeld() {
	slices.SortStableFunc(s.recs, func(a, b rec) int {
		switch ka, kb := s.key(a), s.key(b); {
		case s.less(ka, kb):
			return -1
		case s.less(kb, ka):
			return 1
		}
		return 0
	})
}

// spill writes the held records, sorted, as a run. A file that cannot be created or
// written keeps them (and every later one) in memory, with a warning: the sort still
// comes out right, only bigger.
func (s *Sorter) spill() {
	if s.file == nil {
		dir := s.Dir
		if dir == "" {
			dir = DefaultDir
		}
		f, err := os.CreateTemp(dir, "tribunal-spill-*")
		if err != nil {
			slog.Warn("spillsort: rows kept in memory: no spill file", "dir", dir, "err", err)
			s.inMemory = true
			return
		}
		// Removed at once: the open file is the sorter's alone, and goes when closed.
		os.Remove(f.Name())
		s.file = f
	}
	s.sortHeld()
	w := bufio.NewWriterSize(io.NewOffsetWriter(s.file, s.end), 64<<10)
	var tmp [2 * binary.MaxVarintLen64]byte
	var size int64
	for _, r := range s.recs {
		n := binary.PutUvarint(tmp[:], uint64(r.kLen))
		n += binary.PutUvarint(tmp[n:], uint64(r.vLen))
		w.Write(tmp[:n])
		w.Write(s.key(r))
		w.Write(s.val(r))
		size += int64(n + r.kLen + r.vLen)
	}
	if err := w.Flush(); err != nil {
		slog.Warn("spillsort: rows kept in memory from now on: the spill file failed", "file", s.file.Name(), "err", err)
		s.inMemory = true
		return
	}
	written.Add(size)
	s.runs = append(s.runs, run{s.end, size})
	s.end += size
	s.arena, s.recs, s.held = s.arena[:0], s.recs[:0], 0
}

// Each calls fn with every record in key order (ties in the order added) until fn
// returns an error, which Each returns. key and val are valid only during the call. Each
// may be called again, and Add after it.
func (s *Sorter) Each(fn func(key, val []byte) error) error {
	s.sortHeld()
	if len(s.runs) == 0 {
		for _, r := range s.recs {
			if err := fn(s.key(r), s.val(r)); err != nil {
				return err
			}
		}
		return nil
	}
	// The held records are the last run, in memory: it ranks after every run on file, so
	// ties keep their order.
	m := &merge{less: s.less}
	for i, r := range s.runs {
		c := &cursor{rank: i, r: bufio.NewReaderSize(io.NewSectionReader(s.file, r.off, r.size), readBuffer)}
		if err := c.next(); err != nil {
			return fmt.Errorf("spillsort: read run %d of %s: %w", i, s.file.Name(), err)
		}
		if !c.done {
			m.cs = append(m.cs, c)
		}
	}
	if len(s.recs) > 0 {
		m.cs = append(m.cs, &cursor{rank: len(s.runs), held: s, recs: s.recs})
		m.cs[len(m.cs)-1].next()
	}
	heap.Init(m)
	for len(m.cs) > 0 {
		c := m.cs[0]
		if err := fn(c.key, c.val); err != nil {
			return err
		}
		if err := c.next(); err != nil {
			return fmt.Errorf("spillsort: read run %d of %s: %w", c.rank, s.file.Name(), err)
		}
		if c.done {
			heap.Pop(m)
		} else {
			heap.Fix(m, 0)
		}
	}
	return nil
}

// Close lets go of the sorter's file and records.
func (s *Sorter) Close() error {
	s.arena, s.recs, s.runs = nil, nil, nil
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	return err
}

// cursor is where the merge is in one run: on file (r) or the records held (recs).
type cursor struct {
	rank     int
	r        *bufio.Reader
	held     *Sorter
	recs     []rec
	buf      []byte
	key, val []byte
	done     bool
}

func (c *cursor) next() error {
	if c.held != nil {
		if len(c.recs) == 0 {
			c.done = true
			return nil
		}
		c.key, c.val = c.held.key(c.recs[0]), c.held.val(c.recs[0])
		c.recs = c.recs[1:]
		return nil
	}
	kl, err := binary.ReadUvarint(c.r)
	if errors.Is(err, io.EOF) {
		c.done = true
		return nil
	}
	if err != nil {
		return err
	}
	vl, err := binary.ReadUvarint(c.r)
	if err != nil {
		return err
	}
	n := int(kl + vl)
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	c.buf = c.buf[:n]
	if _, err := io.ReadFull(c.r, c.buf); err != nil {
		return err
	}
	c.key, c.val = c.buf[:kl], c.buf[kl:]
	return nil
}

type merge struct {
	less func(a, b []byte) bool
	cs   []*cursor
}

func (m *merge) Len() int { return len(m.cs) }
func (m *merge) Less(i, j int) bool {
	a, b := m.cs[i], m.cs[j]
	if m.less(a.key, b.key) {
		return true
	}
	if m.less(b.key, a.key) {
		return false
	}
	return a.rank < b.rank
}
func (m *merge) Swap(i, j int) { m.cs[i], m.cs[j] = m.cs[j], m.cs[i] }
func (m *merge) Push(x any)    { m.cs = append(m.cs, x.(*cursor)) }
func (m *merge) Pop() any {
	c := m.cs[len(m.cs)-1]
	m.cs = m.cs[:len(m.cs)-1]
	return c
}

// IntKey is a key that sorts as n does (bytes in order): a batch index.
func IntKey(dst []byte, n int) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(n)^(1<<63))
}
