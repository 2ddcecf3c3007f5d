package index

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// ChunkSize is how many entries a chunk of a stored index holds: a page of the console's
// table (100 rows, 500 at most) reads one or two.
const ChunkSize = 512

// The stored form (v5): magicV5, the entry count, the chunk count, each chunk's entry
// count and byte size (the directory), then the chunks, each a v4 index of its entries
// (its own string table) gzip-compressed on its own. Entries are in batch order.

// writeChunked writes the entries each hands over (in batch order, each encoded with its
// strings inline) as a chunked index. The chunks are compressed into a temporary file
// while the directory, which precedes them, is counted, so what is held is one chunk
// and one compressor, not the stored index: about 32 MB at 1,000,000 entries, and a
// compressor per chunk before this.
func writeChunked(w io.Writer, n int, each func(func([]byte) error) error) error {
	chunks, done, err := chunkFile()
	if err != nil {
		return err
	}
	defer done()
	cw := &countingWriter{w: chunks}
	var dir []byte
	ce := newEncoder()
	var zw *gzip.Writer
	count := 0
	d := &decoder{slab: slabSize, inline: true, seen: map[string]string{}}
	flush := func() error {
		if count == 0 {
			return nil
		}
		start := cw.n
		if zw == nil {
			zw = gzip.NewWriter(cw)
		} else {
			zw.Reset(cw)
		}
		if err := ce.writeTo(zw, count, func(fn func([]byte) error) error { return fn(ce.body.Bytes()) }); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		dir = binary.AppendUvarint(dir, uint64(count))
		dir = binary.AppendUvarint(dir, uint64(cw.n-start))
		// The next chunk's strings are its own: what this one interned is let go.
		ce.body.Reset()
		clear(ce.strings)
		ce.strings[""] = 0
		ce.table = ce.table[:1]
		clear(d.seen)
		count = 0
		return nil
	}
	var e Entry
	if err := each(func(enc []byte) error {
		d.data, d.pos = enc, 0
		e = Entry{}
		d.entry(&e)
		if d.err == nil && d.pos != len(enc) {
			d.fail("bytes after the entry")
		}
		if d.err != nil {
			return fmt.Errorf("a spilled entry: %w", d.err)
		}
		ce.entry(&e)
		count++
		if count == ChunkSize {
			return flush()
		}
		return nil
	}); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(magicV5)
	var tmp [binary.MaxVarintLen64]byte
	bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(n))])
	bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64((n+ChunkSize-1)/ChunkSize))])
	bw.Write(dir)
	if err := bw.Flush(); err != nil {
		return err
	}
	if _, err := chunks.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind the chunks: %w", err)
	}
	if _, err := io.Copy(w, chunks); err != nil {
		return fmt.Errorf("copy the chunks: %w", err)
	}
	return nil
}

// chunkFile is where writeChunked compresses the chunks: a temporary file in the spill
// directory (spillsort.DefaultDir), or memory, said in the log, where none can be made.
func chunkFile() (io.ReadWriteSeeker, func(), error) {
	f, err := os.CreateTemp(spillsort.DefaultDir, "tribunal-index-*")
	if err != nil {
		slog.Warn("index: no temporary file for the chunks, holding them in memory", "dir", spillsort.DefaultDir, "err", err)
		return &memFile{}, func() {}, nil
	}
	return f, func() {
		f.Close()
		os.Remove(f.Name())
	}, nil
}

// memFile is a growing buffer read back from its start (chunkFile's fallback).
type memFile struct {
	buf bytes.Buffer
	rd  *bytes.Reader
}

func (m *memFile) Write(p []byte) (int, error) { return m.buf.Write(p) }

func (m *memFile) Read(p []byte) (int, error) {
	if m.rd == nil {
		return 0, io.EOF
	}
	return m.rd.Read(p)
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	m.rd = bytes.NewReader(m.buf.Bytes())
	return m.rd.Seek(off, whence)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// Reader reads a stored index a chunk at a time: a page of entries reads and decodes the
// chunks it falls in, not the rest.
type Reader struct {
	r      io.ReaderAt
	n      int
	chunks []chunkAt
	// bytes and entries count what was read and decoded (Read).
	bytes   int64
	entries int
	zr      *gzip.Reader
	raw     bytes.Buffer
}

type chunkAt struct {
	first, n  int
	off, size int64
}

// NewReader reads the directory of the chunked index r holds (size bytes). An index
// stored before chunks (v4 and older) is no Reader's: decode it whole (Decode).
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	cr := &countingReader{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 4096)}
	var head [8]byte
	if _, err := io.ReadFull(cr, head[:]); err != nil || !bytes.Equal(head[:], magicV5) {
		return nil, fmt.Errorf("index: %w: not a chunked index", errCorrupt)
	}
	n, err1 := binary.ReadUvarint(cr)
	k, err2 := binary.ReadUvarint(cr)
	if err1 != nil || err2 != nil || n > uint64(size)*64 || k > uint64(size) {
		return nil, fmt.Errorf("index: %w: bad header", errCorrupt)
	}
	rd := &Reader{r: r, n: int(n), chunks: make([]chunkAt, k)}
	first := 0
	for i := range rd.chunks {
		c, err1 := binary.ReadUvarint(cr)
		l, err2 := binary.ReadUvarint(cr)
		if err1 != nil || err2 != nil || c > ChunkSize || l > uint64(size) {
			return nil, fmt.Errorf("index: %w: directory entry %d", errCorrupt, i)
		}
		rd.chunks[i] = chunkAt{first: first, n: int(c), size: int64(l)}
		first += int(c)
	}
	if first != rd.n {
		return nil, fmt.Errorf("index: %w: the directory holds %d entries of %d", errCorrupt, first, rd.n)
	}
	off := cr.n
	for i := range rd.chunks {
		rd.chunks[i].off = off
		off += rd.chunks[i].size
	}
	if off != size {
		return nil, fmt.Errorf("index: %w: chunks end at byte %d of %d", errCorrupt, off, size)
	}
	rd.bytes = cr.n
	return rd, nil
}

// Len is how many entries the index holds.
func (r *Reader) Len() int { return r.n }

// Read is how many bytes of the index were read and entries decoded so far.
func (r *Reader) Read() (bytes int64, entries int) { return r.bytes, r.entries }

// Page returns the entries at positions from to to (not included) in batch order,
// reading only the chunks they are in.
func (r *Reader) Page(from, to int) ([]Entry, error) {
	from, to = max(from, 0), min(to, r.n)
	var out []Entry
	for i := range r.chunks {
		c := &r.chunks[i]
		if c.first+c.n <= from || c.first >= to {
			continue
		}
		es, err := r.chunk(c)
		if err != nil {
			return nil, err
		}
		out = append(out, es[max(from-c.first, 0):min(to-c.first, c.n)]...)
	}
	return out, nil
}

// Each calls fn with every entry in batch order, a chunk decoded at a time (the entry is
// valid until fn returns; copy it to keep it).
func (r *Reader) Each(fn func(*Entry) error) error {
	for i := range r.chunks {
		es, err := r.chunk(&r.chunks[i])
		if err != nil {
			return err
		}
		for j := range es {
			if err := fn(&es[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Reader) chunk(c *chunkAt) ([]Entry, error) {
	// One decompressor and buffer for every chunk the reader reads.
	src := io.NewSectionReader(r.r, c.off, c.size)
	var err error
	if r.zr == nil {
		r.zr, err = gzip.NewReader(src)
	} else {
		err = r.zr.Reset(src)
	}
	if err != nil {
		return nil, fmt.Errorf("index: chunk at entry %d: %w", c.first, err)
	}
	r.raw.Reset()
	_, err = r.raw.ReadFrom(r.zr)
	raw := r.raw.Bytes()
	if err != nil {
		return nil, fmt.Errorf("index: chunk at entry %d: %w", c.first, err)
	}
	es, err := decodeAll(raw)
	if err != nil {
		return nil, fmt.Errorf("index: chunk at entry %d: %w", c.first, err)
	}
	if len(es) != c.n {
		return nil, fmt.Errorf("index: chunk at entry %d: %w: %d entries, the directory says %d", c.first, errCorrupt, len(es), c.n)
	}
	r.bytes += c.size
	r.entries += len(es)
	return es, nil
}

type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}
