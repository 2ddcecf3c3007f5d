package rulebook

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
)

// spillFile is where a Memory keeps its final job records (Memory.SpillDir), and those
// in flight its heldLog has no room for: each record's key and compressed bytes
// appended, read back by offset. A record stored again (a redrive, a review, the next
// step of a job in flight written out before) is appended again; its old bytes stay,
// unread, until the file goes. The key is written with the record so that Memory need
// not hold it: it checks a lookup against it (Memory.find).
type spillFile struct {
	f   *os.File
	end int64
	buf []byte
	// broken is set after a write failed: records stay in memory from then on.
	broken bool
	// batch and batched are the records in flight being written out (Memory.evict):
	// their entries, and the place and length of each.
	batch   []byte
	batched []batchedEntry
}

type batchedEntry struct {
	place uint32
	n     int
}

// spillAt is where a spilled record is: its offset and length, the key and the record's
// bytes together.
type spillAt struct {
	off int64
	n   int
}

// A spillAt is packed in one word (Memory.at): 24 bits of length, 39 of offset, the top
// bit left clear (heldBit marks a record held in memory). A larger record, or a file
// past 512 GiB, stays in memory.
const (
	spillLenBits = 24
	maxSpillLen  = 1<<spillLenBits - 1
	maxSpillEnd  = 1 << (63 - spillLenBits)
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
	s.buf = binary.AppendUvarint(s.buf[:0], uint64(len(key)))
	s.buf = append(append(s.buf, key...), enc...)
	return s.writeEntry(s.buf)
}

// writeEntry appends an entry as write makes it (a heldLog's versions are kept so).
func (s *spillFile) writeEntry(entry []byte) (spillAt, bool) {
	if s.broken || len(entry) > maxSpillLen || s.end+int64(len(entry)) > maxSpillEnd {
		return spillAt{}, false
	}
	n, err := s.f.WriteAt(entry, s.end)
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
func (s *spillFile) read(at spillAt) (key, enc []byte) {
	b := make([]byte, at.n)
	if _, err := s.f.ReadAt(b, at.off); err != nil {
		panic(fmt.Sprintf("rulebook: a job record spilled to %s does not read back: %v", s.f.Name(), err))
	}
	k, enc, ok := splitEntry(b)
	if !ok {
		panic(fmt.Sprintf("rulebook: a job record spilled to %s at %d is not as it was written", s.f.Name(), at.off))
	}
	return k, enc
}

// splitEntry splits an entry into its key and encoded record.
func splitEntry(b []byte) (key, enc []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}
