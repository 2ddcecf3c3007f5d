package rulebook

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
)

// spillFile is where a Memory keeps its final job records (Memory.SpillDir): each
// record's key and compressed bytes appended once, read back by offset. A record stored
// again (a redrive, a review) is appended again; its old bytes stay, unread, until the
// file goes. The key is written with the record so that Memory need not hold it: it
// checks a lookup against it (Memory.find).
type spillFile struct {
	f   *os.File
	end int64
	buf []byte
	// broken is set after a write failed: records stay in memory from then on.
	broken bool
}

// spillAt is where a spilled record is: its offset and length, the key and the record's
// bytes together.
type spillAt struct {
	off int64
	n   int
}

// A spillAt is packed in one word (Memory.at): 24 bits of length, 40 of offset. A larger
// record, or a file past a terabyte, stays in memory.
const (
	spillLenBits = 24
	maxSpillLen  = 1<<spillLenBits - 1
	maxSpillEnd  = 1 << (64 - spillLenBits)
)

// pack is at in one word, never 0 (an entry holds at least a key's length).
func (at spillAt) pack() uint64 { return uint64(at.off)<<spillLenBits | uint64(at.n) }

func unpackSpillAt(w uint64) spillAt {
	return spillAt{off: int64(w >> spillLenBits), n: int(w & maxSpillLen)}
}

// newSpillFile creates the spill file of m in dir, nil when it cannot (m then holds its
// records in memory, as without SpillDir). The file is removed at once where an open
// file can be, else when m is collected; it is closed when m is collected.
func newSpillFile(m *Memory, dir string) *spillFile {
	f, err := os.CreateTemp(dir, "tribunal-records-*")
	if err != nil {
		slog.Warn("rulebook: job records kept in memory: no spill file", "dir", dir, "err", err)
		return nil
	}
	name := f.Name()
	removed := os.Remove(name) == nil
	runtime.AddCleanup(m, func(f *os.File) {
		f.Close()
		if !removed {
			os.Remove(f.Name())
		}
	}, f)
	return &spillFile{f: f}
}

// write appends key and enc; false when the file cannot take them (the caller keeps the
// record in memory).
func (s *spillFile) write(key string, enc []byte) (spillAt, bool) {
	if s.broken {
		return spillAt{}, false
	}
	s.buf = binary.AppendUvarint(s.buf[:0], uint64(len(key)))
	s.buf = append(append(s.buf, key...), enc...)
	if len(s.buf) > maxSpillLen || s.end+int64(len(s.buf)) > maxSpillEnd {
		return spillAt{}, false
	}
	n, err := s.f.WriteAt(s.buf, s.end)
	if err != nil {
		// A full disk, say: what was written stays readable, the rest stays in memory.
		slog.Warn("rulebook: job records kept in memory from now on: the spill file failed", "file", s.f.Name(), "err", err)
		s.broken = true
		return spillAt{}, false
	}
	at := spillAt{off: s.end, n: n}
	s.end += int64(n)
	return at, true
}

// read returns the key and record written at at. The file is the Memory's own, written
// by it: a failed read is a broken machine, not bad input.
func (s *spillFile) read(at spillAt) (key string, enc []byte) {
	b := make([]byte, at.n)
	if _, err := s.f.ReadAt(b, at.off); err != nil {
		panic(fmt.Sprintf("rulebook: a job record spilled to %s does not read back: %v", s.f.Name(), err))
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		panic(fmt.Sprintf("rulebook: a job record spilled to %s at %d is not as it was written", s.f.Name(), at.off))
	}
	return string(b[w : w+int(n)]), b[w+int(n):]
}
