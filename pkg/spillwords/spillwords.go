// Package spillwords holds an array of 64-bit words longer than the heap should hold:
// the audit keeps a few words for every job it replays (where its record is, its place
// in its batch's order, where its submission is in the stream), and at 1,000,000 jobs
// those alone were tens of MB, the heap growing with the batch rather than with the
// jobs in flight.
//
// A Words keeps pages of 512 words (4 KiB) in memory up to a budget. When a page is
// needed and the budget is spent, the page used least recently (by a clock sweep) is
// written to a temporary file, if it changed since it was read, and let go; reading a
// word of a page on file reads its page back. The readers that use it touch a window of
// recent words (the jobs in flight), so the pages resident are those, and what the heap
// holds is the budget and a pointer and a bit a page.
//
// A Words is not safe for concurrent use.
package spillwords

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
)

// PageWords is how many words a page holds.
const PageWords = 512

const pageBytes = PageWords * 8

// Words is an array of uint64, zero until set. Its zero value is not usable: see New.
type Words struct {
	dir    string
	budget int // pages resident at most; 0: no limit
	n      int
	// pages are the resident pages by page number (nil: not resident); onFile the bits
	// of the pages written to the file at least once (a page never written and not
	// resident is all zeros).
	pages  []*page
	onFile []uint64
	// ring is the resident pages' numbers, the clock's hand at hand.
	ring []int
	hand int
	file *fileRef
	buf  []byte
	// failed is set once the file could not be made or written: every page then stays
	// resident, as the budget had been lifted.
	failed bool
}

type page struct {
	w          []uint64
	ref, dirty bool
}

// fileRef closes (and removes, where an open file could not be) the file when the Words
// is collected.
type fileRef struct {
	f       *os.File
	pending string
}

func (r *fileRef) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	if r.pending != "" {
		os.Remove(r.pending)
		r.pending = ""
	}
}

// New starts an empty Words that keeps at most budget bytes of pages in memory (at least
// one page), the rest in a temporary file in dir. dir "" keeps every page in memory.
func New(dir string, budget int) *Words {
	w := &Words{dir: dir}
	if dir != "" {
		w.budget = max(1, budget/pageBytes)
	}
	return w
}

// Len is how many words the array has.
func (w *Words) Len() int { return w.n }

// Resident is how many pages are in memory.
func (w *Words) Resident() int { return len(w.ring) }

// Written is whether any page went to the file.
func (w *Words) Written() bool { return w.file != nil && w.file.f != nil }

// Grow makes the array n words long if it is shorter, the new words zero.
func (w *Words) Grow(n int) {
	if n <= w.n {
		return
	}
	w.n = n
	if np := (n + PageWords - 1) / PageWords; np > len(w.pages) {
		w.pages = append(w.pages, make([]*page, np-len(w.pages))...)
		if nb := (np + 63) / 64; nb > len(w.onFile) {
			w.onFile = append(w.onFile, make([]uint64, nb-len(w.onFile))...)
		}
	}
}

// Append adds v at the end.
func (w *Words) Append(v uint64) {
	i := w.n
	w.Grow(i + 1)
	w.Set(i, v)
}

// Get returns word i, which is below Len.
func (w *Words) Get(i int) uint64 {
	if uint(i) >= uint(w.n) {
		panic(fmt.Sprintf("spillwords: word %d of %d", i, w.n))
	}
	p := i / PageWords
	pg := w.pages[p]
	if pg == nil {
		if !w.isOnFile(p) {
			return 0
		}
		pg = w.load(p)
	}
	pg.ref = true
	if j := i % PageWords; j < len(pg.w) {
		return pg.w[j]
	}
	return 0
}

// Set sets word i, which is below Len, to v.
func (w *Words) Set(i int, v uint64) {
	if uint(i) >= uint(w.n) {
		panic(fmt.Sprintf("spillwords: word %d of %d", i, w.n))
	}
	p := i / PageWords
	pg := w.pages[p]
	if pg == nil {
		pg = w.load(p)
	}
	pg.ref, pg.dirty = true, true
	j := i % PageWords
	if j >= len(pg.w) {
		// A page is as long as its words set so far: the last page of a short array
		// costs what it holds, not 4 KiB.
		pg.w = append(pg.w, make([]uint64, j+1-len(pg.w))...)
	}
	pg.w[j] = v
}

// Close lets go of the file and the pages; the Words is not used after.
func (w *Words) Close() {
	if w.file != nil {
		w.file.close()
	}
	w.pages, w.ring, w.onFile, w.n = nil, nil, nil, 0
}

func (w *Words) isOnFile(p int) bool { return w.onFile[p/64]&(1<<(p%64)) != 0 }

// load makes page p resident, read back from the file when it was written there,
// making room first when the budget is spent.
func (w *Words) load(p int) *page {
	if w.budget > 0 && !w.failed && len(w.ring) >= w.budget {
		w.evictOne()
	}
	pg := &page{}
	if w.isOnFile(p) {
		pg.w = w.read(p)
	}
	w.pages[p] = pg
	w.ring = append(w.ring, p)
	return pg
}

// evictOne lets go of a page not used since the clock's hand last passed it, writing it
// out when it changed. When it cannot be written, it stays and so does every page after.
func (w *Words) evictOne() {
	for {
		if w.hand >= len(w.ring) {
			w.hand = 0
		}
		p := w.ring[w.hand]
		pg := w.pages[p]
		if pg.ref {
			pg.ref = false
			w.hand++
			continue
		}
		if pg.dirty {
			if err := w.write(p, pg.w); err != nil {
				slog.Warn("spillwords: a page could not be written out: the words stay in memory", "dir", w.dir, "err", err)
				w.failed = true
				return
			}
			w.onFile[p/64] |= 1 << (p % 64)
		}
		w.pages[p] = nil
		last := len(w.ring) - 1
		w.ring[w.hand] = w.ring[last]
		w.ring = w.ring[:last]
		return
	}
}

func (w *Words) write(p int, words []uint64) error {
	if w.file == nil {
		f, err := os.CreateTemp(w.dir, "tribunal-words-*")
		if err != nil {
			return fmt.Errorf("spillwords: create a file in %s: %w", w.dir, err)
		}
		w.file = &fileRef{f: f}
		if os.Remove(f.Name()) != nil {
			w.file.pending = f.Name()
		}
		runtime.AddCleanup(w, (*fileRef).close, w.file)
	}
	if w.file.f == nil {
		return errors.New("spillwords: the file is closed")
	}
	buf := w.buf[:0]
	for _, v := range words {
		buf = binary.LittleEndian.AppendUint64(buf, v)
	}
	w.buf = buf
	if _, err := w.file.f.WriteAt(buf, int64(p)*pageBytes); err != nil {
		return fmt.Errorf("spillwords: write page %d to %s: %w", p, w.file.f.Name(), err)
	}
	return nil
}

// read reads page p back: as many words as were written, the rest of the page reading
// as zeros when set.
func (w *Words) read(p int) []uint64 {
	if cap(w.buf) < pageBytes {
		w.buf = make([]byte, pageBytes)
	}
	buf := w.buf[:pageBytes]
	n, err := w.file.f.ReadAt(buf, int64(p)*pageBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		// Its own file, written by it: a failed read is a broken machine.
		panic(fmt.Sprintf("spillwords: page %d of %s does not read back: %v", p, w.file.f.Name(), err))
	}
	words := make([]uint64, PageWords)
	for j := range n / 8 {
		words[j] = binary.LittleEndian.Uint64(buf[j*8:])
	}
	// Trailing zeros need no room: a page written short reads back as short.
	last := len(words)
	for last > 0 && words[last-1] == 0 {
		last--
	}
	return words[:last:PageWords]
}
