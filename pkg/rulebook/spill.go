package rulebook

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
)

// spillFile is where a Memory keeps its final job records (Memory.SpillDir): each
// record's compressed bytes appended once, read back by offset. A record stored again
// (a redrive, a review) is appended again; its old bytes stay, unread, until the file
// goes.
type spillFile struct {
	f   *os.File
	end int64
	// broken is set after a write failed: records stay in memory from then on.
	broken bool
}

// spillAt is where a spilled record's bytes are.
type spillAt struct {
	off int64
	n   uint32
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

// write appends enc; false when the file cannot take it (the caller keeps it in memory).
func (s *spillFile) write(enc []byte) (spillAt, bool) {
	if s.broken || len(enc) > 1<<31 {
		return spillAt{}, false
	}
	n, err := s.f.WriteAt(enc, s.end)
	if err != nil {
		// A full disk, say: what was written stays readable, the rest stays in memory.
		slog.Warn("rulebook: job records kept in memory from now on: the spill file failed", "file", s.f.Name(), "err", err)
		s.broken = true
		return spillAt{}, false
	}
	at := spillAt{off: s.end, n: uint32(n)}
	s.end += int64(n)
	return at, true
}

// read returns the bytes written at at. The file is the Memory's own, written by it:
// a failed read is a broken machine, not bad input.
func (s *spillFile) read(at spillAt) []byte {
	b := make([]byte, at.n)
	if _, err := s.f.ReadAt(b, at.off); err != nil {
		panic(fmt.Sprintf("rulebook: a job record spilled to %s does not read back: %v", s.f.Name(), err))
	}
	return b
}
