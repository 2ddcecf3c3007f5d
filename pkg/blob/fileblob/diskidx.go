package fileblob

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// The packed-object index of a tenant is kept in "<root>/<tenant>/packs/objects.idx", so
// that a process opening the folder (an audit, the viewer, a report) reads it by pread
// rather than holding every packed object on its heap: at 1,000,000 ACs (3,000,000
// objects) the in-memory index was about 140 MB in every such process.
//
// The file is one sorted run of fixed-size entries, the 256 shards (by the digest's
// first byte) one after another, behind a header:
//
//	magic "TBIX" | crc32c of the rest of the header u32 | version u32 | header length u32 |
//	entries u64 | packs u32 | media types u32 | dups u32 | crc32c of the entries u32 |
//	256 × entries of the shard u32 |
//	packs: name length u16, name, covered end u64 |
//	media types: length u16, media type |
//	dups: sha256 [32]byte, pack u16
//
// and an entry is sha256 [32]byte | record offset u64 | size u32 | pack u16 | media type
// u16 (little endian; pack and media type are positions in the header's tables). A
// pack's covered end says that every whole record before it is in the file (or was
// deleted): an opener scans each pack only past its end, and a pack the file does not
// name from its start. Dups are the other packs holding a copy of an indexed object,
// which Delete compacts too.
//
// The file is written whole under a temporary name, fsynced and renamed over the old
// one, so it is either the old file or the new; still, an opener checks the header's
// checksum, the size, the entries' checksum and their order before it trusts any of it,
// and a file that fails is ignored (and rewritten): the index is rebuilt from the packs.
// Nothing is lost with it, as the packs hold every record's header.
//
// Between two writes the Store keeps what the file lacks in memory (tenantIndex.objs):
// the records of packs it appends to, and of packs scanned past their covered end. The
// file is rewritten (the old one merged with those, in one sequential pass) when they
// reach an eighth of the file, at least flushMin entries, and at Close: so the
// heap holds at most about an eighth of the objects while a Store writes (flushed as its
// packs fill, in the background), and nearly nothing in a process that only reads a
// folder whose writer has closed. A pack a Store appends to is written into the file
// only once it is sealed (full, and every append to it indexed) or at Close.
const (
	indexName    = "objects.idx"
	indexMagic   = "TBIX"
	indexVersion = 1
	// indexFixed is the header up to the packs table.
	indexFixed = 36 + 256*4
	diskEntry  = 48
	// diskFence is the entries per fence: a lookup preads one block of 16 entries
	// (768 B), and the fences cost 0.25 B an object.
	diskFence = 16
	// flushMin is the fewest entries the memory part gathers before the file is
	// rewritten, and flushRatio the file's share they may reach: an eighth keeps the
	// heap small while the rewrites (each a pass over the file) total about nine times
	// the file's size over its life.
	flushMin   = 1 << 15
	flushRatio = 8
	// maxDiskPacks and maxDiskMT bound a file's tables (u16 positions); an object past
	// them stays in memory.
	maxDiskPacks = 1<<16 - 1
	maxDiskMT    = 1<<16 - 1
)

// diskIndex is a loaded index file. It is immutable but for its filter (and the misses
// counted towards it), which a loaded file builds once it has missed enough (see
// filterAfter); a rewrite installs a new one.
type diskIndex struct {
	f     *os.File
	count int
	// start is the first entry of each shard; start[256] is count.
	start [257]int
	// fence is bytes 1-4 of the key of every diskFence-th entry of each shard.
	fence [256][]uint32
	// filter, once there, answers most misses without a read. Only misses gain from
	// it (a Put of a new object looks it up first, and so does a scan indexing a
	// record), so the file a rewrite writes has it from the start, and a loaded file
	// none until it has missed filterAfter times: a process that only reads objects
	// that exist (an audit, the viewer, a report) never pays its 1.25 B an object.
	filter atomic.Pointer[bloom]
	// misses counts the lookups the file answered by a read, without a filter, with
	// nothing found; building is closed when the one build of the filter has ended,
	// stop tells it to end early (the file is being closed). bmu guards building and
	// closed.
	misses   atomic.Int64
	stop     atomic.Bool
	bmu      sync.Mutex
	building chan struct{}
	closed   bool
	// sum is the entries' checksum, which the build checks the bytes it read against.
	sum uint32
	// packIdx maps the file's packs to the Store's (tenantIndex.packs), -1 for a pack
	// that is gone or no longer matches; mtIdx maps its media types to the Store's.
	packIdx []int32
	mtIdx   []uint32
	dataOff int64
}

// bloom is a blocked Bloom filter of a file's keys: 10 bits a key in blocks of one
// cache line, six bits a key in one block (about 1 % false positives). The keys are
// digests, so their bytes are the hashes: bytes 8-15 pick the block, 16-23 the bits.
type bloom []uint64

const bloomBits = 10

func newBloom(n int) bloom {
	blocks := max(1, (n*bloomBits+511)/512)
	return make(bloom, blocks*8)
}

func (b bloom) spot(key *[32]byte) (block []uint64, h uint64) {
	n := uint64(len(b) / 8)
	i := binary.LittleEndian.Uint64(key[8:16]) % n
	return b[i*8 : i*8+8], binary.LittleEndian.Uint64(key[16:24])
}

func (b bloom) add(key *[32]byte) {
	blk, h := b.spot(key)
	for range 6 {
		blk[h&511>>6] |= 1 << (h & 63)
		h >>= 9
	}
}

func (b bloom) has(key *[32]byte) bool {
	if len(b) == 0 {
		return false
	}
	blk, h := b.spot(key)
	for range 6 {
		if blk[h&511>>6]&(1<<(h&63)) == 0 {
			return false
		}
		h >>= 9
	}
	return true
}

// diskPack is one pack of a file's table.
type diskPack struct {
	name string
	end  int64
}

// parsed is an index file's header.
type parsedIndex struct {
	count   int
	shard   [256]int
	packs   []diskPack
	mts     []string
	dups    []diskDup
	sum     uint32
	dataOff int64
}

type diskDup struct {
	key  [32]byte
	pack uint16
}

type dentry struct {
	key  [32]byte
	off  uint64
	size uint32
	pack uint16
	mt   uint16
}

func putDentry(b []byte, e *dentry) {
	copy(b, e.key[:])
	binary.LittleEndian.PutUint64(b[32:], e.off)
	binary.LittleEndian.PutUint32(b[40:], e.size)
	binary.LittleEndian.PutUint16(b[44:], e.pack)
	binary.LittleEndian.PutUint16(b[46:], e.mt)
}

func getDentry(b []byte) dentry {
	var e dentry
	copy(e.key[:], b)
	e.off = binary.LittleEndian.Uint64(b[32:])
	e.size = binary.LittleEndian.Uint32(b[40:])
	e.pack = binary.LittleEndian.Uint16(b[44:])
	e.mt = binary.LittleEndian.Uint16(b[46:])
	return e
}

func (s *Store) indexPath(tenant string) string {
	return filepath.Join(s.packsDir(tenant), indexName)
}

// readIndexHeader parses and checks the header of an index file of the given size.
func readIndexHeader(f *os.File, size int64) (*parsedIndex, error) {
	fixed := make([]byte, indexFixed)
	if _, err := f.ReadAt(fixed, 0); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if string(fixed[:4]) != indexMagic {
		return nil, errors.New("header: bad magic")
	}
	if v := binary.LittleEndian.Uint32(fixed[8:]); v != indexVersion {
		return nil, fmt.Errorf("header: version %d, want %d", v, indexVersion)
	}
	hlen := int64(binary.LittleEndian.Uint32(fixed[12:]))
	if hlen < indexFixed || hlen > size {
		return nil, fmt.Errorf("header: length %d in a file of %d bytes", hlen, size)
	}
	h := make([]byte, hlen)
	if _, err := f.ReadAt(h, 0); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if crc32.Checksum(h[8:], castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, errors.New("header: checksum mismatch")
	}
	p := &parsedIndex{dataOff: hlen}
	count := binary.LittleEndian.Uint64(h[16:])
	if count > uint64(size) || hlen+int64(count)*diskEntry != size {
		return nil, fmt.Errorf("%d entries after a %d-byte header in a file of %d bytes", count, hlen, size)
	}
	p.count = int(count)
	npacks := int(binary.LittleEndian.Uint32(h[24:]))
	nmts := int(binary.LittleEndian.Uint32(h[28:]))
	ndups := int(binary.LittleEndian.Uint32(h[32:]))
	p.sum = binary.LittleEndian.Uint32(h[36:])
	// The shard counts follow the entries' checksum: 36+4 = 40.
	total := 0
	for s := range 256 {
		p.shard[s] = int(binary.LittleEndian.Uint32(h[40+4*s:]))
		total += p.shard[s]
	}
	if total != p.count {
		return nil, fmt.Errorf("shards hold %d entries, header says %d", total, p.count)
	}
	r := h[40+256*4:]
	short := errors.New("header: tables cut short")
	for range npacks {
		if len(r) < 2 {
			return nil, short
		}
		n := int(binary.LittleEndian.Uint16(r))
		if len(r) < 2+n+8 {
			return nil, short
		}
		p.packs = append(p.packs, diskPack{name: string(r[2 : 2+n]), end: int64(binary.LittleEndian.Uint64(r[2+n:]))})
		r = r[2+n+8:]
	}
	for range nmts {
		if len(r) < 2 {
			return nil, short
		}
		n := int(binary.LittleEndian.Uint16(r))
		if len(r) < 2+n {
			return nil, short
		}
		p.mts = append(p.mts, string(r[2:2+n]))
		r = r[2+n:]
	}
	for range ndups {
		if len(r) < 34 {
			return nil, short
		}
		var d diskDup
		copy(d.key[:], r)
		d.pack = binary.LittleEndian.Uint16(r[32:])
		if int(d.pack) >= npacks {
			return nil, errors.New("header: a dup names no pack")
		}
		p.dups = append(p.dups, d)
		r = r[34:]
	}
	if len(r) != 0 {
		return nil, errors.New("header: bytes after the tables")
	}
	return p, nil
}

// readIndexFile checks an index file whole (header, checksum and order of the entries)
// and builds its fences, but not its filter (see diskIndex.filter). It reads the file
// once, through a small buffer.
func readIndexFile(f *os.File) (*diskIndex, *parsedIndex, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	p, err := readIndexHeader(f, st.Size())
	if err != nil {
		return nil, nil, err
	}
	d := &diskIndex{f: f, count: p.count, dataOff: p.dataOff, sum: p.sum}
	br := bufio.NewReaderSize(io.NewSectionReader(f, p.dataOff, int64(p.count)*diskEntry), 1<<20)
	crc := uint32(0)
	var b [diskEntry]byte
	i := 0
	for sh := range 256 {
		d.start[sh] = i
		fence := make([]uint32, (p.shard[sh]+diskFence-1)/diskFence)
		var prev [32]byte
		for j := range p.shard[sh] {
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return nil, nil, fmt.Errorf("entry %d: %w", i, err)
			}
			crc = crc32.Update(crc, castagnoli, b[:])
			if int(b[0]) != sh || (j > 0 && bytes.Compare(prev[:], b[:32]) >= 0) {
				return nil, nil, fmt.Errorf("entry %d: out of order", i)
			}
			if int(binary.LittleEndian.Uint16(b[44:])) >= len(p.packs) || int(binary.LittleEndian.Uint16(b[46:])) >= len(p.mts) {
				return nil, nil, fmt.Errorf("entry %d: names no pack or media type", i)
			}
			copy(prev[:], b[:32])
			if j%diskFence == 0 {
				fence[j/diskFence] = binary.BigEndian.Uint32(b[1:5])
			}
			i++
		}
		d.fence[sh] = fence
	}
	d.start[256] = i
	if crc != p.sum {
		return nil, nil, errors.New("entries: checksum mismatch")
	}
	return d, p, nil
}

// get returns key's entry in the file. A key the filter (when there is one) does not
// deny costs one block read. An I/O error reads as a miss: the caller then rescans the
// packs, and a read of the object would check its digest anyway.
func (d *diskIndex) get(key *[32]byte) (dentry, bool) {
	sh := int(key[0])
	fs := d.fence[sh]
	if len(fs) == 0 {
		return dentry{}, false
	}
	filter := d.filter.Load()
	if filter != nil && !filter.has(key) {
		return dentry{}, false
	}
	n := d.start[sh+1] - d.start[sh]
	p := binary.BigEndian.Uint32(key[1:5])
	lb, ub := lowerBound(fs, p), len(fs)
	if p < 1<<32-1 && lb < ub && fs[lb] == p { // ties, as in shard.find
		ub = lb + lowerBound(fs[lb:], p+1)
	} else {
		ub = lb
	}
	lo := max(lb-1, 0) * diskFence
	hi := min(ub*diskFence, n)
	if lo >= hi {
		return dentry{}, false
	}
	// A block's buffer escapes to ReadAt, so it is pooled rather than on the stack.
	bp := blockBufs.Get().(*[diskFence * diskEntry]byte)
	defer blockBufs.Put(bp)
	buf := bp[:]
	if m := (hi - lo) * diskEntry; m > len(buf) {
		buf = make([]byte, m)
	} else {
		buf = buf[:m]
	}
	if _, err := d.f.ReadAt(buf, d.dataOff+int64(d.start[sh]+lo)*diskEntry); err != nil {
		slog.Warn("fileblob: cannot read the packed-object index", "file", d.f.Name(), "err", err)
		return dentry{}, false
	}
	i, j := 0, hi-lo
	for i < j {
		m := int(uint(i+j) >> 1)
		if bytes.Compare(buf[m*diskEntry:m*diskEntry+32], key[:]) < 0 {
			i = m + 1
		} else {
			j = m
		}
	}
	if i < hi-lo && bytes.Equal(buf[i*diskEntry:i*diskEntry+32], key[:]) {
		return getDentry(buf[i*diskEntry:]), true
	}
	if filter == nil && d.misses.Add(1) == d.filterAfter() {
		d.startFilter()
	}
	return dentry{}, false
}

// filterAfter is the misses a loaded file answers by reads before it builds its filter:
// as many as cost about what the build does, so that a process that misses little never
// pays for the filter and one that misses much pays at most about twice the reads that
// having it from the start would have saved.
func (d *diskIndex) filterAfter() int64 {
	return int64(max(filterMinMisses, d.count/filterEntriesPerMiss))
}

const (
	// filterEntriesPerMiss is the entries the build's sequential pass takes in the
	// time of one miss's read of a block: the pass took 24-27 ns an entry (a 200,000-
	// entry file in the page cache) and a miss 445-465 ns, so about 18 (at 3,000,000
	// objects, 187,500 misses: about 80 ms either way).
	filterEntriesPerMiss = 16
	// filterMinMisses is the fewest misses before a build, so that a process that
	// misses a few times on a small file (4096 reads take about 2 ms in all) does not
	// hold a filter for them.
	filterMinMisses = 4096
)

// startFilter builds the filter in the background, once; lookups go on by reads
// meanwhile.
func (d *diskIndex) startFilter() {
	d.bmu.Lock()
	defer d.bmu.Unlock()
	if d.building != nil || d.closed || d.filter.Load() != nil {
		return
	}
	done := make(chan struct{})
	d.building = done
	go func() {
		defer close(done)
		d.buildFilter()
	}()
}

var errStopped = errors.New("stopped")

// buildFilter reads the file's entries in one sequential pass into a new filter and
// installs it, unless the entries no longer match the checksum they had when the file
// was loaded: a filter of other keys would deny present ones. A read that fails leaves
// the file without a filter (lookups go on by reads).
func (d *diskIndex) buildFilter() {
	filter := newBloom(d.count)
	br := bufio.NewReaderSize(io.NewSectionReader(d.f, d.dataOff, int64(d.count)*diskEntry), 1<<20)
	crc := uint32(0)
	var b [diskEntry]byte
	var key [32]byte
	err := func() error {
		for i := range d.count {
			if i%4096 == 0 && d.stop.Load() {
				return errStopped
			}
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			crc = crc32.Update(crc, castagnoli, b[:])
			copy(key[:], b[:32])
			filter.add(&key)
		}
		if crc != d.sum {
			return errors.New("entries: checksum mismatch since the file was loaded")
		}
		return nil
	}()
	switch {
	case errors.Is(err, errStopped):
	case err != nil:
		slog.Warn("fileblob: cannot build the packed-object index's filter; its misses go on reading the file", "file", d.f.Name(), "err", err)
	default:
		d.filter.Store(&filter)
	}
}

// close stops a build of the filter under way, waits for it and closes the file.
func (d *diskIndex) close() error {
	d.stop.Store(true)
	d.bmu.Lock()
	d.closed = true
	done := d.building
	d.bmu.Unlock()
	if done != nil {
		<-done
	}
	return d.f.Close()
}

var blockBufs = sync.Pool{New: func() any { return new([diskFence * diskEntry]byte) }}

// loc turns a file entry into the Store's location, false when its pack is gone.
func (d *diskIndex) loc(e dentry) (loc, bool) {
	pi := d.packIdx[e.pack]
	if pi < 0 {
		return loc{}, false
	}
	return loc{off: int64(e.off), size: e.size, pack: uint32(pi), mt: d.mtIdx[e.mt]}, true
}

// eachEntry calls fn with every entry of the file in order, reading it sequentially.
func (d *diskIndex) eachEntry(fn func(sh int, e dentry) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(d.f, d.dataOff, int64(d.count)*diskEntry), 1<<20)
	var b [diskEntry]byte
	for sh := range 256 {
		for range d.start[sh+1] - d.start[sh] {
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return fmt.Errorf("read %s: %w", d.f.Name(), err)
			}
			if err := fn(sh, getDentry(b[:])); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadIndex reads the tenant's index file, if there is one and it checks out, and
// registers the packs it names at their covered ends; the caller holds scanMu, before
// the first scan of the tenant.
func (s *Store) loadIndex(t *tenantIndex) {
	path := s.indexPath(t.name)
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("fileblob: cannot open the packed-object index; scanning the packs", "file", path, "err", err)
		}
		t.rebuild = true // a folder of an older version, or a new one
		return
	}
	d, p, err := readIndexFile(f)
	if err != nil {
		f.Close()
		slog.Warn("fileblob: the packed-object index is damaged; rebuilding it from the packs", "file", path, "err", err)
		t.rebuild = true
		return
	}
	dir := s.packsDir(t.name)
	d.packIdx = make([]int32, len(p.packs))
	s.imu.Lock()
	defer s.imu.Unlock()
	for i, dp := range p.packs {
		d.packIdx[i] = -1
		if filepath.Base(dp.name) != dp.name || filepath.Ext(dp.name) != packExt {
			continue
		}
		if _, known := t.byName[dp.name]; known {
			continue
		}
		pf, err := os.Open(filepath.Join(dir, dp.name))
		if err != nil {
			continue // gone (compacted or removed): its entries are dropped
		}
		st, err := pf.Stat()
		if err != nil || st.Size() < dp.end {
			// Not the pack the file was written for: scanned from its start instead.
			slog.Warn("fileblob: a pack is shorter than the index says; scanning it whole", "pack", pf.Name(), "indexed_to", dp.end, "err", err)
			pf.Close()
			t.rebuild = true
			continue
		}
		pk := &pack{path: filepath.Join(dir, dp.name), f: pf, scannedTo: dp.end}
		s.addPack(t, pk)
		d.packIdx[i] = int32(pk.idx)
	}
	d.mtIdx = make([]uint32, len(p.mts))
	for i, mt := range p.mts {
		d.mtIdx[i] = s.intern([]byte(mt))
	}
	for _, dup := range p.dups {
		if pi := d.packIdx[dup.pack]; pi >= 0 {
			if t.dups == nil {
				t.dups = map[[32]byte][]uint32{}
			}
			t.dups[dup.key] = append(t.dups[dup.key], uint32(pi))
		}
	}
	t.disk = d
}

// flushJob is one rewrite of a tenant's index file: what it merges (the memory part
// frozen at its start, and the old file) and what it may cover.
type flushJob struct {
	t      *tenantIndex
	frozen *objIndex
	deadF  map[[32]byte]struct{}
	old    *diskIndex
	// fileNum maps the Store's packs to the new file's table, -1 for a pack it does
	// not cover; ends are the covered ends of the table's packs.
	fileNum []int32
	gone    []bool // the Store's packs compacted away
	packs   []diskPack
	mts     []string
	dups    []diskDup
	// keep gathers the frozen entries the file cannot cover, returned to memory.
	keep []keyLoc
}

type keyLoc struct {
	key [32]byte
	l   loc
}

// needsFlush says whether the memory part has outgrown its share of the file; the
// caller holds imu.
func (s *Store) needsFlush(t *tenantIndex) bool {
	if t.noPersist || t.frozen != nil {
		return false
	}
	n := 0
	if t.disk != nil {
		n = t.disk.count
	}
	return t.objs.len() >= max(s.tune.flushMin, n/s.tune.flushRatio)
}

// freeze starts a rewrite: the memory part is frozen (lookups still see it) and a new
// one takes the Puts that come meanwhile. The caller holds scanMu (so that the scan
// ends it covers match what is indexed); closing covers every own pack.
func (s *Store) freeze(t *tenantIndex, closing bool) *flushJob {
	s.imu.Lock()
	defer s.imu.Unlock()
	if t.noPersist || t.frozen != nil {
		return nil
	}
	j := &flushJob{t: t, old: t.disk, fileNum: make([]int32, len(t.packs)), gone: make([]bool, len(t.packs))}
	for i, p := range t.packs {
		j.fileNum[i] = -1
		j.gone[i] = p.gone
		if p.gone || len(j.packs) >= maxDiskPacks {
			continue
		}
		var end int64
		switch {
		case !p.own:
			end = p.scannedTo
		case closing || (p.sealed.Load() && p.inflight.Load() == 0):
			end = p.end.Load()
		default:
			continue // still appended to: its records stay in memory
		}
		j.fileNum[i] = int32(len(j.packs))
		j.packs = append(j.packs, diskPack{name: filepath.Base(p.path), end: end})
	}
	j.mts = slices.Clone(s.mtypes)
	for k, ps := range t.dups {
		for _, pi := range ps {
			if fn := j.fileNum[pi]; fn >= 0 {
				j.dups = append(j.dups, diskDup{key: k, pack: uint16(fn)})
			}
		}
	}
	fz := new(objIndex)
	*fz = t.objs
	t.objs = objIndex{}
	j.frozen, j.deadF = fz, t.dead
	t.frozen, t.deadF, t.dead = fz, t.dead, nil
	return j
}

func (j *flushJob) isGone(pack uint32) bool { return int(pack) < len(j.gone) && j.gone[pack] }

// covered says whether the new file can hold l, and its entry.
func (j *flushJob) covered(key [32]byte, l loc) (dentry, bool) {
	if int(l.pack) >= len(j.fileNum) || l.mt > maxDiskMT {
		return dentry{}, false
	}
	fn := j.fileNum[l.pack]
	if fn < 0 || l.off >= j.packs[fn].end {
		return dentry{}, false
	}
	return dentry{key: key, off: uint64(l.off), size: l.size, pack: uint16(fn), mt: uint16(l.mt)}, true
}

// frozenShard returns the frozen entries of one shard in order.
func frozenShard(fz *objIndex, sh int, wide []keyLoc) []keyLoc {
	x := &fz.shards[sh]
	out := make([]keyLoc, 0, len(x.run)-x.dead+len(x.recent)+len(wide))
	i, k := 0, 0
	next := func() (keyLoc, bool) {
		for i < len(x.run) && x.run[i].pm == deadPM {
			i++
		}
		switch {
		case i < len(x.run) && (k >= len(x.recent) || cmpKey(&x.run[i].key, &x.recent[k].key) < 0):
			i++
			return keyLoc{x.run[i-1].key, x.run[i-1].loc()}, true
		case k < len(x.recent):
			k++
			return keyLoc{x.recent[k-1].key, x.recent[k-1].loc()}, true
		}
		return keyLoc{}, false
	}
	w := 0
	for {
		e, ok := next()
		for w < len(wide) && (!ok || cmpKey(&wide[w].key, &e.key) < 0) {
			out = append(out, wide[w])
			w++
		}
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

// write merges the old file and the frozen entries into a new file, installed by
// rename; it takes no lock (both inputs are immutable).
func (s *Store) writeIndex(j *flushJob) (*diskIndex, error) {
	dir := s.packsDir(j.t.name)
	var wide [256][]keyLoc
	for k, l := range j.frozen.wide {
		wide[k[0]] = append(wide[k[0]], keyLoc{k, l})
	}
	for sh := range wide {
		slices.SortFunc(wide[sh], func(a, b keyLoc) int { return cmpKey(&a.key, &b.key) })
	}

	var hdr bytes.Buffer
	hdr.Write(make([]byte, indexFixed+4))
	for _, p := range j.packs {
		hdr.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(p.name))))
		hdr.WriteString(p.name)
		hdr.Write(binary.LittleEndian.AppendUint64(nil, uint64(p.end)))
	}
	nmts := min(len(j.mts), maxDiskMT)
	for _, mt := range j.mts[:nmts] {
		hdr.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(mt))))
		hdr.WriteString(mt)
	}
	for _, d := range j.dups {
		hdr.Write(d.key[:])
		hdr.Write(binary.LittleEndian.AppendUint16(nil, d.pack))
	}
	h := hdr.Bytes()
	hlen := int64(len(h))

	tmp, err := os.CreateTemp(dir, tmpGlob)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Seek(hlen, io.SeekStart); err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	most := j.frozen.len()
	if j.old != nil {
		most += j.old.count
	}
	// A writer looks up every new object, so this file has its filter from the start.
	filter := newBloom(most)
	d := &diskIndex{dataOff: hlen, packIdx: make([]int32, len(j.packs)), mtIdx: make([]uint32, nmts)}
	d.filter.Store(&filter)
	for i := range j.fileNum {
		if fn := j.fileNum[i]; fn >= 0 {
			d.packIdx[fn] = int32(i)
		}
	}
	for i := range d.mtIdx {
		d.mtIdx[i] = uint32(i)
	}
	var shardN [256]int
	crc := uint32(0)
	var b [diskEntry]byte
	count := 0
	var werr error
	emit := func(sh int, e *dentry) {
		n := shardN[sh]
		if n%diskFence == 0 {
			d.fence[sh] = append(d.fence[sh], binary.BigEndian.Uint32(e.key[1:5]))
		}
		shardN[sh]++
		count++
		filter.add(&e.key)
		putDentry(b[:], e)
		crc = crc32.Update(crc, castagnoli, b[:])
		if _, err := w.Write(b[:]); err != nil && werr == nil {
			werr = err
		}
	}
	// The frozen entries of the shard being merged, and how far they are taken.
	cur, fzs, fi := -1, []keyLoc(nil), 0
	takeFrozen := func(sh int, upto *[32]byte) {
		for fi < len(fzs) && (upto == nil || cmpKey(&fzs[fi].key, upto) <= 0) {
			kl := fzs[fi]
			fi++
			if e, ok := j.covered(kl.key, kl.l); ok {
				emit(sh, &e)
			} else if !j.isGone(kl.l.pack) {
				j.keep = append(j.keep, kl)
			}
		}
	}
	advance := func(sh int) {
		for cur < sh {
			if cur >= 0 {
				takeFrozen(cur, nil)
			}
			cur++
			d.start[cur] = count
			fzs, fi = frozenShard(j.frozen, cur, wide[cur]), 0
		}
	}
	if j.old != nil {
		err := j.old.eachEntry(func(sh int, e dentry) error {
			advance(sh)
			takeFrozen(sh, &e.key)
			if fi > 0 && fzs[fi-1].key == e.key {
				return nil // replaced since
			}
			if _, dead := j.deadF[e.key]; dead {
				return nil
			}
			l, ok := j.old.loc(e)
			if !ok || j.isGone(l.pack) {
				return nil
			}
			if ne, ok := j.covered(e.key, l); ok {
				emit(sh, &ne)
			} else {
				j.keep = append(j.keep, keyLoc{e.key, l})
			}
			return werr
		})
		if err != nil {
			return nil, err
		}
	}
	advance(255)
	takeFrozen(255, nil)
	d.start[256] = count
	if werr != nil {
		return nil, werr
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	copy(h, indexMagic)
	binary.LittleEndian.PutUint32(h[8:], indexVersion)
	binary.LittleEndian.PutUint32(h[12:], uint32(hlen))
	binary.LittleEndian.PutUint64(h[16:], uint64(count))
	binary.LittleEndian.PutUint32(h[24:], uint32(len(j.packs)))
	binary.LittleEndian.PutUint32(h[28:], uint32(nmts))
	binary.LittleEndian.PutUint32(h[32:], uint32(len(j.dups)))
	binary.LittleEndian.PutUint32(h[36:], crc)
	for sh := range 256 {
		binary.LittleEndian.PutUint32(h[40+4*sh:], uint32(shardN[sh]))
	}
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(h[8:], castagnoli))
	if _, err := tmp.WriteAt(h, 0); err != nil {
		return nil, err
	}
	if err := tmp.Chmod(filePerm); err != nil {
		return nil, err
	}
	if err := s.fsync(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), s.indexPath(j.t.name)); err != nil {
		return nil, err
	}
	done = true
	d.f, d.count, d.sum = tmp, count, crc
	if err := s.syncDir(dir); err != nil {
		d.f.Close()
		return nil, err
	}
	return d, nil
}

// install makes the new file the tenant's, or on failure puts the frozen entries back
// into memory; either way the frozen part is gone after it.
func (s *Store) installIndex(j *flushJob, d *diskIndex, err error) {
	t := j.t
	s.imu.Lock()
	defer s.imu.Unlock()
	back := func(kl keyLoc) {
		if _, ok := t.objs.get(kl.key); ok {
			return // put again meanwhile
		}
		if _, dead := t.dead[kl.key]; dead {
			return // deleted meanwhile
		}
		t.objs.put(kl.key, kl.l)
	}
	if err != nil {
		// Memory keeps everything, as before the index had a file; a folder that cannot
		// take it (read-only, full) is not tried again by this Store.
		slog.Warn("fileblob: cannot write the packed-object index; keeping it in memory", "file", s.indexPath(t.name), "err", err)
		t.noPersist = true
		j.frozen.each(func(k [32]byte, l loc) { back(keyLoc{k, l}) })
		for k := range j.deadF {
			if _, ok := t.objs.get(k); !ok {
				if t.dead == nil {
					t.dead = map[[32]byte]struct{}{}
				}
				t.dead[k] = struct{}{}
			}
		}
		t.frozen, t.deadF = nil, nil
		return
	}
	for _, kl := range j.keep {
		back(kl)
	}
	if t.disk != nil {
		t.disk.close()
	}
	t.disk, t.frozen, t.deadF = d, nil, nil
}

// flush rewrites the tenant's index file now; the caller holds scanMu.
func (s *Store) flushLocked(t *tenantIndex, closing bool) {
	j := s.freeze(t, closing)
	if j == nil {
		return
	}
	d, err := s.writeIndex(j)
	s.installIndex(j, d, err)
}

// flushAsync rewrites the index file in the background (a writer whose pack just
// filled), so that no Put waits for the pass over the file.
func (s *Store) flushAsync(t *tenantIndex) {
	s.flushWG.Go(func() {
		s.scanMu.Lock()
		j := s.freeze(t, false)
		s.scanMu.Unlock()
		if j == nil {
			return
		}
		d, err := s.writeIndex(j)
		s.installIndex(j, d, err)
	})
}

// tenantIndex's lookups go through the layers newest first: the memory part, the keys
// deleted since the file was written, the part frozen for a rewrite under way (and its
// deletions), the file.

func (t *tenantIndex) get(key [32]byte) (loc, bool) {
	if l, ok := t.objs.get(key); ok {
		return l, true
	}
	if _, dead := t.dead[key]; dead {
		return loc{}, false
	}
	if t.frozen != nil {
		if l, ok := t.frozen.get(key); ok {
			return l, true
		}
		if _, dead := t.deadF[key]; dead {
			return loc{}, false
		}
	}
	if t.disk != nil {
		if e, ok := t.disk.get(&key); ok {
			return t.disk.loc(e)
		}
	}
	return loc{}, false
}

// put points key at l and returns the location it had.
func (t *tenantIndex) put(key [32]byte, l loc) (loc, bool) {
	old, had := t.get(key)
	t.objs.put(key, l)
	delete(t.dead, key)
	return old, had
}

// del drops key and returns the location it had.
func (t *tenantIndex) del(key [32]byte) (loc, bool) {
	l, ok := t.get(key)
	if !ok {
		return loc{}, false
	}
	t.objs.del(key)
	if t.disk != nil || t.frozen != nil {
		if t.dead == nil {
			t.dead = map[[32]byte]struct{}{}
		}
		t.dead[key] = struct{}{}
	}
	return l, true
}

// size is about the number of objects indexed (an upper bound), for sizing.
func (t *tenantIndex) size() int {
	n := t.objs.len()
	if t.frozen != nil {
		n += t.frozen.len()
	}
	if t.disk != nil {
		n += t.disk.count
	}
	return n
}

// each calls fn with every indexed object once, in no particular order.
func (t *tenantIndex) each(fn func(key [32]byte, l loc)) error {
	t.objs.each(fn)
	if t.frozen != nil {
		t.frozen.each(func(k [32]byte, l loc) {
			if _, ok := t.objs.get(k); ok {
				return
			}
			if _, dead := t.dead[k]; !dead {
				fn(k, l)
			}
		})
	}
	if t.disk == nil {
		return nil
	}
	return t.disk.eachEntry(func(_ int, e dentry) error {
		if _, ok := t.objs.get(e.key); ok {
			return nil
		}
		if _, dead := t.dead[e.key]; dead {
			return nil
		}
		if t.frozen != nil {
			if _, ok := t.frozen.get(e.key); ok {
				return nil
			}
			if _, dead := t.deadF[e.key]; dead {
				return nil
			}
		}
		if l, ok := t.disk.loc(e); ok {
			fn(e.key, l)
		}
		return nil
	})
}
