package fileblob

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// Pack files keep small objects as records appended to "<root>/<tenant>/packs/*.pack",
// so that storing one costs a write into an open file instead of the half-dozen
// file-system metadata operations of a file per object (create, chmod, rename, stat,
// mkdir, and a metadata file for typed objects): those were a fifth of the all-in-one
// mode's CPU. Content addressing is unchanged: a record carries its object's digest, and
// every read is verified against it as a file's is.
//
// A record is
//
//	magic "TBPK" | crc32c of the rest of the header | size u32 | media type length u16 |
//	reserved u16 | sha256 [32]byte | media type | data
//
// (little endian). The header checksum lets a scan tell a record from a torn tail (a
// crash mid-append) or garbage: a scan stops at the first record that is not whole and
// ignores the rest of that pack. The data is not in the checksum: the digest guards it,
// on every read.
//
// Each Store appends only to packs it created (a fresh one per Store, rolled past
// packCap), so processes sharing a folder never interleave their writes; each finds the
// others' records through the index file (diskidx.go) and by scanning the packs past
// what it covers, lazily, and again when a lookup misses (another process may have
// appended since).
const (
	packExt   = ".pack"
	packMagic = "TBPK"
	// packHeader is the fixed part of a record's header; the media type follows it.
	packHeader = 48
	// packThreshold is the largest object a pack-mode Put appends to a pack. The objects
	// of a judging run (artifacts, judge-call records, small manifests) are a few KiB;
	// 256 KiB takes nearly all of them while a Put's in-memory buffer (one per Put in
	// flight) stays small, and larger objects amortise a file's creation over their bytes
	// anyway.
	packThreshold = 256 << 10
	// packCap is the size past which a writer starts a new pack. It bounds what a
	// compaction after `tribunal prune` rewrites for one deleted record.
	packCap = 64 << 20
	// maxPackedMediaType bounds the media type a record carries; an object with a longer
	// one goes to a file, whose metadata file has no limit.
	maxPackedMediaType = 1024
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pack is one pack file this Store knows.
type pack struct {
	idx  uint32 // position in tenantIndex.packs
	path string
	f    *os.File
	// own packs were created by this Store, which appends to them; it never scans them.
	own bool
	// end is where the next record of an own pack goes; every record before it is fully
	// written. Written under Store.amu.
	end atomic.Int64
	// full is set when an own pack passed packCap or a write or sync failed (the tail may
	// be torn), so that the next Put starts a new pack. Guarded by Store.amu.
	full bool
	// scannedTo ends the whole records a scan read from a foreign pack, and seenSize is
	// the pack's size at that scan; bad stops rescans of a pack with a damaged record.
	// Guarded by Store.scanMu.
	scannedTo, seenSize int64
	bad, toldTorn       bool
	// syncMu serialises fsyncs; synced is the end the last fsync covered (group commit).
	syncMu sync.Mutex
	synced int64
	// sealed is set when an own pack takes no more appends (full, or rolled past), and
	// inflight counts its appends not yet indexed: a sealed pack with none is whole in
	// the index and may go into the index file (see diskidx.go).
	sealed   atomic.Bool
	inflight atomic.Int32
	// gone is set when a compaction replaced the pack (guarded by imu).
	gone bool
}

// validEnd is the end of the records known whole.
func (p *pack) validEnd() int64 {
	if p.own {
		return p.end.Load()
	}
	return p.scannedTo
}

// loc is where a packed object is. The index keeps it packed smaller still (see
// objIndex): it holds every packed object, 3,000,000 and more at 1,000,000 ACs.
type loc struct {
	off  int64 // the record's start
	size uint32
	pack uint32
	mt   uint32 // interned media type
}

// pending is a Put of a key in progress, which a concurrent Put of the same key waits
// for instead of appending a second record with perhaps another media type.
type pending struct {
	done  chan struct{}
	attrs blob.Attrs
	err   error
}

// tenantIndex is what a Store knows of one tenant's packs. Guarded by Store.imu, except
// loaded and rolled.
type tenantIndex struct {
	name string
	// The packed objects are in layers (see get): objs, in memory, holds what the index
	// file lacks; dead the keys deleted since the file was written; frozen and deadF
	// the layers a rewrite of the file under way is merging; disk the file.
	objs      objIndex
	dead      map[[32]byte]struct{}
	frozen    *objIndex
	deadF     map[[32]byte]struct{}
	disk      *diskIndex
	noPersist bool // the file cannot be written: everything stays in memory
	// rebuild says the file was missing pieces or damaged, and changed that this Store
	// indexed its own records or deleted some: Close rewrites the file.
	rebuild, changed bool
	rolled           atomic.Bool // an own pack filled since the last rewrite
	packs            []*pack
	byName           map[string]uint32
	pending          map[[32]byte]*pending
	// dups names the other packs holding a copy of a key (two writers that packed the
	// same bytes, or a damaged copy put again), so that Delete compacts those too.
	dups   map[[32]byte][]uint32
	cur    *pack // the own pack Puts append to (Store.amu)
	loaded atomic.Bool
}

// packState is the pack part of a Store.
type packState struct {
	imu     sync.RWMutex
	tenants map[string]*tenantIndex
	mtypes  []string
	mtIdx   map[string]uint32
	// dirty packs hold records of deleted objects; Close compacts them.
	dirty map[*pack]*tenantIndex
	// amu serialises appends (each one write at the pack's end).
	amu sync.Mutex
	// scanMu serialises scans, which update the packs' scan positions, and the starts
	// of the index file's rewrites (which cover those positions).
	scanMu sync.Mutex
	// flushWG tracks the background rewrites of index files, which Close waits for.
	flushWG sync.WaitGroup
}

var packBufs = sync.Pool{New: func() any {
	b := make([]byte, packHeader+maxPackedMediaType+packThreshold+1)
	return &b
}}

func (s *Store) packsDir(tenant string) string { return filepath.Join(s.root, tenant, "packs") }

func (s *Store) tenantIdx(tenant string) *tenantIndex {
	s.imu.RLock()
	t := s.tenants[tenant]
	s.imu.RUnlock()
	if t != nil {
		return t
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	if t = s.tenants[tenant]; t == nil {
		if s.tenants == nil {
			s.tenants = map[string]*tenantIndex{}
		}
		t = &tenantIndex{name: tenant, byName: map[string]uint32{}, pending: map[[32]byte]*pending{}}
		s.tenants[tenant] = t
	}
	return t
}

// intern returns the media type's number; the caller holds imu for writing.
func (s *Store) intern(mt []byte) uint32 {
	if i, ok := s.mtIdx[string(mt)]; ok {
		return i
	}
	if s.mtIdx == nil {
		s.mtIdx = map[string]uint32{}
	}
	i := uint32(len(s.mtypes))
	s.mtypes = append(s.mtypes, string(mt))
	s.mtIdx[string(mt)] = i
	return i
}

// lookup finds a packed object, loading the tenant's packs on first use.
func (s *Store) lookup(t *tenantIndex, key [32]byte) (loc, *pack, string, bool) {
	if !t.loaded.Load() {
		s.rescan(t)
	}
	s.imu.RLock()
	defer s.imu.RUnlock()
	l, ok := t.get(key)
	if !ok {
		return loc{}, nil, "", false
	}
	return l, t.packs[l.pack], s.mtypes[l.mt], true
}

func refKey(ref blob.Ref) [32]byte {
	var k [32]byte
	_, _ = hex.Decode(k[:], []byte(ref.SHA256)) // ref.Validate passed
	return k
}

func packedAttrs(ref blob.Ref, l loc, mt string) blob.Attrs {
	return blob.Attrs{Ref: ref, Size: int64(l.size), MediaType: mt}
}

func dataOff(l loc, mt string) int64 { return l.off + packHeader + int64(len(mt)) }

// rescan reads the tenant's packs that appeared or grew since the last scan.
func (s *Store) rescan(t *tenantIndex) {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	if !t.loaded.Load() && t.disk == nil && !t.rebuild {
		s.loadIndex(t)
	}
	dir := s.packsDir(t.name)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		slog.Warn("fileblob: cannot list packs", "dir", dir, "err", err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, packExt) {
			continue
		}
		s.imu.RLock()
		i, known := t.byName[name]
		var p *pack
		if known {
			p = t.packs[i]
		}
		s.imu.RUnlock()
		if p == nil {
			f, err := os.Open(filepath.Join(dir, name))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) { // compacted away meanwhile
					slog.Warn("fileblob: cannot open pack", "pack", filepath.Join(dir, name), "err", err)
				}
				continue
			}
			p = &pack{path: filepath.Join(dir, name), f: f}
			s.imu.Lock()
			s.addPack(t, p)
			s.imu.Unlock()
		}
		if p.own || p.bad {
			continue
		}
		st, err := p.f.Stat()
		if err != nil || st.Size() == p.seenSize {
			continue
		}
		s.scanPack(t, p, st.Size())
		// A folder without a usable index file (one written by an older version, or
		// damaged) is indexed into the file as it is scanned, pack by pack, so that the
		// heap never holds more than the share the file allows.
		s.imu.RLock()
		flush := s.needsFlush(t)
		s.imu.RUnlock()
		if flush {
			s.flushLocked(t, false)
		}
	}
	t.loaded.Store(true)
}

// addPack registers p; the caller holds imu for writing.
func (s *Store) addPack(t *tenantIndex, p *pack) {
	p.idx = uint32(len(t.packs))
	t.packs = append(t.packs, p)
	t.byName[filepath.Base(p.path)] = p.idx
}

// index points key at l, remembering the pack of a copy it replaces; the caller holds
// imu for writing.
func (s *Store) index(t *tenantIndex, key [32]byte, l loc) {
	if old, ok := t.put(key, l); ok && old.pack != l.pack {
		if t.dups == nil {
			t.dups = map[[32]byte][]uint32{}
		}
		t.dups[key] = append(t.dups[key], old.pack)
	}
}

// record is one parsed record header.
type record struct {
	off, size int64
	hdrLen    int64
	key       [32]byte
	mt        []byte // valid until the next read of the scanner
}

// scanner reads record headers through a window, skipping the data by offset: the
// headers of thousands of small records come with one read.
type scanner struct {
	f     *os.File
	size  int64
	buf   []byte
	start int64
	n     int
}

// at returns n bytes at off, or fewer when the pack ends before.
func (sc *scanner) at(off int64, n int) []byte {
	if off >= sc.start && off+int64(n) <= sc.start+int64(sc.n) {
		return sc.buf[off-sc.start : off-sc.start+int64(n)]
	}
	if n > len(sc.buf) {
		sc.buf = make([]byte, n)
	}
	m, _ := sc.f.ReadAt(sc.buf, off)
	sc.start, sc.n = off, m
	return sc.buf[:min(m, n)]
}

// next parses the record at off. ok is false at the end of the whole records; bad
// then says whether what follows is damaged (rather than merely incomplete: a writer
// still at work, or a torn tail).
func (sc *scanner) next(off int64) (r record, ok, bad bool) {
	if off >= sc.size {
		return r, false, false
	}
	h := sc.at(off, packHeader)
	if len(h) < packHeader {
		m := min(len(h), len(packMagic))
		return r, false, string(h[:m]) != packMagic[:m]
	}
	if string(h[:4]) != packMagic {
		return r, false, true
	}
	mtLen := int(binary.LittleEndian.Uint16(h[12:]))
	if mtLen > maxPackedMediaType {
		return r, false, true
	}
	h = sc.at(off, packHeader+mtLen)
	if len(h) < packHeader+mtLen {
		return r, false, false
	}
	if crc32.Checksum(h[8:], castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return r, false, true
	}
	r = record{off: off, size: int64(binary.LittleEndian.Uint32(h[8:])), hdrLen: int64(packHeader + mtLen), mt: h[packHeader:]}
	copy(r.key[:], h[16:48])
	if off+r.hdrLen+r.size > sc.size {
		return r, false, false
	}
	return r, true, false
}

// scanPack indexes the whole records of a foreign pack past its last scan.
func (s *Store) scanPack(t *tenantIndex, p *pack, size int64) {
	sc := &scanner{f: p.f, size: size, buf: make([]byte, 256<<10)}
	type found struct {
		key [32]byte
		l   loc
		mt  string
	}
	var recs []found
	off := p.scannedTo
	for {
		r, ok, bad := sc.next(off)
		if !ok {
			switch {
			case bad:
				p.bad = true
				slog.Warn("fileblob: pack has a damaged record; the records after it are ignored", "pack", p.path, "offset", off)
			case off < size && !p.toldTorn:
				p.toldTorn = true
				slog.Info("fileblob: pack ends in an incomplete record (a crash mid-append, or a writer still at work)", "pack", p.path, "offset", off)
			}
			break
		}
		recs = append(recs, found{r.key, loc{off: r.off, size: uint32(r.size), pack: p.idx}, string(r.mt)})
		off += r.hdrLen + r.size
	}
	s.imu.Lock()
	for _, f := range recs {
		f.l.mt = s.intern([]byte(f.mt))
		s.index(t, f.key, f.l)
	}
	s.imu.Unlock()
	p.scannedTo, p.seenSize = off, size
}

// putPacked is Put for a pack-mode store. When the body turns out larger than a pack
// takes, it returns a reader over the whole body for the file path instead (and release,
// to call once that is done).
func (s *Store) putPacked(ctx context.Context, tenant string, r io.Reader, mediaType, expected string, deferred bool) (a blob.Attrs, large io.Reader, release func(), err error) {
	bp := packBufs.Get().(*[]byte)
	release = func() { packBufs.Put(bp) }
	buf := *bp
	limit := min(int64(packThreshold), s.maxSize)
	h := packHeader + len(mediaType)
	data := buf[h : h+int(limit)+1]
	n := 0
	for n < len(data) {
		if err := ctx.Err(); err != nil {
			release()
			return a, nil, nil, fmt.Errorf("fileblob: put %s: %w", tenant, err)
		}
		m, rerr := r.Read(data[n:])
		n += m
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			release()
			return a, nil, nil, fmt.Errorf("fileblob: put %s: %w", tenant, rerr)
		}
	}
	if int64(n) > limit {
		if limit == s.maxSize {
			release()
			return a, nil, nil, fmt.Errorf("fileblob: put %s: %w: more than %d bytes", tenant, blob.ErrTooLarge, s.maxSize)
		}
		return a, io.MultiReader(bytes.NewReader(data[:n]), r), release, nil
	}
	defer release()
	data = data[:n]
	key := sha256.Sum256(data)
	sum := hex.EncodeToString(key[:])
	if err := blob.CheckExpected(tenant, expected, sum); err != nil {
		return a, nil, nil, fmt.Errorf("fileblob: put: %w", err)
	}
	ref := blob.Ref{Tenant: tenant, SHA256: sum}
	a = blob.Attrs{Ref: ref, Size: int64(n), MediaType: mediaType}
	t := s.tenantIdx(tenant)
	var pend *pending
	for pend == nil {
		l, p, mt, ok := s.lookup(t, key)
		if ok {
			if s.sameBytes(p, dataOff(l, mt), data) {
				// Same bytes already stored: keep the first writer's media type so that
				// every caller sees the same Attrs for the same ref. A deferred Put may
				// have stored them: a caller that wants them durable waits for that.
				return packedAttrs(ref, l, mt), nil, nil, s.syncUnlessDeferred(p, l, mt, deferred)
			}
			slog.Warn("fileblob: replacing damaged packed object", "ref", ref.String(), "pack", p.path)
		}
		s.imu.Lock()
		if other := t.pending[key]; other != nil {
			s.imu.Unlock()
			<-other.done
			if other.err == nil && !deferred {
				continue // synced by the lookup above on the next pass
			}
			if other.err == nil {
				return other.attrs, nil, nil, nil
			}
			continue
		}
		if l2, ok2 := t.get(key); ok2 && (!ok || l2 != l) {
			s.imu.Unlock() // published meanwhile: look again
			continue
		}
		pend = &pending{done: make(chan struct{})}
		t.pending[key] = pend
		s.imu.Unlock()
	}
	a, err = s.appendPublished(ctx, t, key, a, buf[:h+n], s.fileAttrs(ref, int64(n)), deferred)
	s.imu.Lock()
	delete(t.pending, key)
	s.imu.Unlock()
	pend.attrs, pend.err = a, err
	close(pend.done)
	return a, nil, nil, err
}

// fileAttrs returns the attrs of the object when a file (of an older store, or a
// non-pack Put) already holds it, so a Put of the same bytes stores nothing.
func (s *Store) fileAttrs(ref blob.Ref, n int64) *blob.Attrs {
	st, err := os.Stat(s.dataPath(ref))
	if err != nil || st.Size() != n {
		return nil
	}
	a := s.attrs(ref, st.Size())
	return &a
}

// appendPublished appends the record in rec (header space first, data after it) unless
// existing is set, syncs it unless deferred and makes it visible in the index.
func (s *Store) appendPublished(ctx context.Context, t *tenantIndex, key [32]byte, a blob.Attrs, rec []byte, existing *blob.Attrs, deferred bool) (blob.Attrs, error) {
	if existing != nil {
		return *existing, nil
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, fmt.Errorf("fileblob: put %s: %w", a.Ref, err)
	}
	mt := a.MediaType
	h := rec[:packHeader+len(mt)]
	copy(h, packMagic)
	binary.LittleEndian.PutUint32(h[8:], uint32(a.Size))
	binary.LittleEndian.PutUint16(h[12:], uint16(len(mt)))
	h[14], h[15] = 0, 0
	copy(h[16:48], key[:])
	copy(h[packHeader:], mt)
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(h[8:], castagnoli))

	p, off, err := s.appendRecord(t, rec)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("fileblob: put %s: %w", a.Ref, err)
	}
	// Counted in appendRecord; indexed (or failed) by the time this returns.
	defer p.inflight.Add(-1)
	if !deferred {
		if err := s.syncPack(p, off+int64(len(rec))); err != nil {
			return blob.Attrs{}, fmt.Errorf("fileblob: put %s: sync %s: %w", a.Ref, p.path, err)
		}
	}
	s.imu.Lock()
	s.index(t, key, loc{off: off, size: uint32(a.Size), pack: p.idx, mt: s.intern([]byte(mt))})
	t.changed = true
	flush := t.rolled.Load() && s.needsFlush(t)
	if flush {
		t.rolled.Store(false)
	}
	s.imu.Unlock()
	if flush {
		s.flushAsync(t)
	}
	return a, nil
}

// sameBytes reports whether the packed data at off equals data: a Put of bytes that are
// already packed stores nothing only when the stored copy is intact (a crash can leave a
// whole header over data that never reached the disk).
func (s *Store) sameBytes(p *pack, off int64, data []byte) bool {
	got := make([]byte, len(data))
	n, err := p.f.ReadAt(got, off)
	if n == len(got) {
		err = nil
	}
	return err == nil && bytes.Equal(got, data)
}

// appendRecord writes rec at the end of the tenant's own pack, starting one when there is
// none or it is full, with one write.
func (s *Store) appendRecord(t *tenantIndex, rec []byte) (*pack, int64, error) {
	s.amu.Lock()
	defer s.amu.Unlock()
	p := t.cur
	if p == nil || p.full || (p.end.Load() > 0 && p.end.Load()+int64(len(rec)) > s.tune.packCap) {
		if p != nil {
			p.sealed.Store(true)
			t.rolled.Store(true)
		}
		var err error
		if p, err = s.newPack(t); err != nil {
			return nil, 0, err
		}
		t.cur = p
	}
	off := p.end.Load()
	if _, err := p.f.WriteAt(rec, off); err != nil {
		p.full = true // the tail may be torn: append no more after it
		return nil, 0, err
	}
	p.end.Store(off + int64(len(rec)))
	p.inflight.Add(1)
	return p, off, nil
}

// newPack creates an own pack; the caller holds amu (taken before scanMu, as in Close).
func (s *Store) newPack(t *tenantIndex) (*pack, error) {
	dir := s.packsDir(t.name)
	if err := s.mkdirSynced(filepath.Join(s.root, t.name), s.root); err != nil {
		return nil, err
	}
	if err := s.mkdirSynced(dir, filepath.Join(s.root, t.name)); err != nil {
		return nil, err
	}
	// A scan must not meet the new pack before it is registered as this store's own.
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	// CreateTemp's exclusive create gives every writer a name of its own.
	f, err := os.CreateTemp(dir, "*"+packExt)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(filePerm); err != nil {
		f.Close()
		return nil, err
	}
	if err := s.syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	p := &pack{path: f.Name(), f: f, own: true}
	s.imu.Lock()
	s.addPack(t, p)
	s.imu.Unlock()
	return p, nil
}

// syncPack makes the pack durable up to end. Concurrent Puts share fsyncs (group
// commit): one fsync covers every record whose write completed before it began, so a
// Put that waited for another's fsync often finds its own record already covered.
func (s *Store) syncPack(p *pack, end int64) error {
	if s.noSync {
		return nil
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if p.synced >= end {
		return nil
	}
	target := p.end.Load()
	if err := p.f.Sync(); err != nil {
		s.amu.Lock()
		p.full = true // after a failed fsync the written pages may be lost
		s.amu.Unlock()
		return err
	}
	p.synced = target
	return nil
}

// syncUnlessDeferred makes the packed record at l durable for a Put that is not
// deferred. Only this Store's own packs can hold records it has not synced; another
// process's records are as durable as that process made them.
func (s *Store) syncUnlessDeferred(p *pack, l loc, mt string, deferred bool) error {
	if deferred || !p.own {
		return nil
	}
	if err := s.syncPack(p, dataOff(l, mt)+int64(l.size)); err != nil {
		return fmt.Errorf("fileblob: sync %s: %w", p.path, err)
	}
	return nil
}

// Sync implements blob.Syncer: every record appended so far, deferred ones included,
// becomes durable. Objects stored as files were synced by their Put.
func (s *Store) Sync(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("fileblob: sync: %w", err)
	}
	return s.syncOwnPacks()
}

// syncOwnPacks fsyncs every pack this Store appends to, up to its end.
func (s *Store) syncOwnPacks() error {
	if s.noSync {
		return nil
	}
	s.imu.RLock()
	var own []*pack
	for _, t := range s.tenants {
		for _, p := range t.packs {
			if p.own {
				own = append(own, p)
			}
		}
	}
	s.imu.RUnlock()
	var errs []error
	for _, p := range own {
		if err := s.syncPack(p, p.end.Load()); err != nil {
			errs = append(errs, fmt.Errorf("fileblob: sync %s: %w", p.path, err))
		}
	}
	return errors.Join(errs...)
}

// openPacked opens a packed object for reading, verified like a file.
func openPacked(ctx context.Context, ref blob.Ref, l loc, p *pack, mt string) (io.ReadCloser, blob.Attrs) {
	a := packedAttrs(ref, l, mt)
	sr := io.NewSectionReader(p.f, dataOff(l, mt), int64(l.size))
	// Closing it leaves the pack open.
	return blob.NewVerifyingReader(io.NopCloser(blob.ContextReader(ctx, sr)), a), a
}

// findPacked finds a packed object, rescanning the packs on a miss (another process may
// have written it since the last scan).
func (s *Store) findPacked(ref blob.Ref, rescan bool) (loc, *pack, string, bool) {
	t := s.tenantIdx(ref.Tenant)
	key := refKey(ref)
	if l, p, mt, ok := s.lookup(t, key); ok || !rescan {
		return l, p, mt, ok
	}
	s.rescan(t)
	return s.lookup(t, key)
}

// Locate says where an object's bytes are: the file (a per-object file, or the pack
// holding it), the offset of the first byte in it and the size. It is for operators
// (inspecting or restoring one object by hand) and for tests that damage an object on
// purpose; everything else reads through Open, which verifies the bytes.
func (s *Store) Locate(ref blob.Ref) (path string, offset, size int64, err error) {
	if err := s.check(context.Background()); err != nil {
		return "", 0, 0, fmt.Errorf("fileblob: locate %s: %w", ref, err)
	}
	if err := ref.Validate(); err != nil {
		return "", 0, 0, fmt.Errorf("fileblob: locate: %w", err)
	}
	if l, p, mt, ok := s.findPacked(ref, false); ok {
		return p.path, dataOff(l, mt), int64(l.size), nil
	}
	if st, err := os.Stat(s.dataPath(ref)); err == nil {
		return s.dataPath(ref), 0, s.attrs(ref, st.Size()).Size, nil
	}
	if l, p, mt, ok := s.findPacked(ref, true); ok {
		return p.path, dataOff(l, mt), int64(l.size), nil
	}
	return "", 0, 0, fmt.Errorf("fileblob: locate %s: %w", ref, blob.ErrNotFound)
}

// deletePacked drops a packed object from the index; Close compacts its pack.
func (s *Store) deletePacked(ref blob.Ref) {
	t := s.tenantIdx(ref.Tenant)
	if _, _, _, ok := s.findPacked(ref, true); !ok {
		return
	}
	key := refKey(ref)
	s.imu.Lock()
	defer s.imu.Unlock()
	if l, ok := t.del(key); ok {
		t.changed = true
		if s.dirty == nil {
			s.dirty = map[*pack]*tenantIndex{}
		}
		s.dirty[t.packs[l.pack]] = t
		for _, i := range t.dups[key] {
			s.dirty[t.packs[i]] = t
		}
		delete(t.dups, key)
	}
}

// packedRefs lists a tenant's packed objects after a rescan.
func (s *Store) packedRefs(tenant string) map[blob.Ref]int64 {
	t := s.tenantIdx(tenant)
	s.rescan(t)
	s.imu.RLock()
	defer s.imu.RUnlock()
	out := make(map[blob.Ref]int64, t.size())
	err := t.each(func(k [32]byte, l loc) {
		out[blob.Ref{Tenant: tenant, SHA256: hex.EncodeToString(k[:])}] = int64(l.size)
	})
	if err != nil {
		slog.Warn("fileblob: cannot list the packed objects of the index file", "tenant", tenant, "err", err)
	}
	return out
}

// closePacks compacts the packs that hold deleted records, brings the index files up to
// date and closes every pack; the caller holds amu and scanMu.
func (s *Store) closePacks() error {
	var errs []error
	for p, t := range s.dirty {
		if err := s.compact(t, p); err != nil {
			errs = append(errs, fmt.Errorf("fileblob: compact %s: %w", p.path, err))
		}
	}
	s.dirty = nil
	s.imu.RLock()
	var flush []*tenantIndex
	for _, t := range s.tenants {
		// A writer's records, a prune's deletions and a folder indexed anew go into
		// the file; a reader that found a few records past it leaves the file alone
		// (the next writer's rewrite takes them).
		if t.loaded.Load() && len(t.packs) > 0 && (t.changed || t.rebuild || t.objs.len() >= s.tune.flushMin) {
			flush = append(flush, t)
		}
	}
	s.imu.RUnlock()
	for _, t := range flush {
		s.flushLocked(t, true)
	}
	s.imu.RLock()
	defer s.imu.RUnlock()
	for _, t := range s.tenants {
		for _, p := range t.packs {
			if p.gone {
				continue
			}
			if err := p.f.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if t.disk != nil {
			t.disk.close()
		}
	}
	return errors.Join(errs...)
}

// compact rewrites a pack with only the records the index still points to (a record of
// a deleted object is dead, and so is an older copy of one put again since) into a new
// pack, under a name of its own, and removes the old one (or only removes it when nothing
// in it lives). A new name, not a rename over the old, keeps a pack's name meaning one
// sequence of records, which the index file relies on (it covers packs by name). Only a
// caller that knows no other process appends to the pack may delete (see Delete), so
// its records past the index's end are a torn tail at most. The caller holds scanMu.
func (s *Store) compact(t *tenantIndex, p *pack) error {
	dir := filepath.Dir(p.path)
	tmp, err := os.CreateTemp(dir, tmpGlob)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 256<<10)
	end := p.validEnd()
	sc := &scanner{f: p.f, size: end, buf: make([]byte, 256<<10)}
	var moved []keyLoc
	var newOff int64
	for off := int64(0); ; {
		r, ok, _ := sc.next(off)
		if !ok {
			break
		}
		s.imu.RLock()
		l, found := t.get(r.key)
		s.imu.RUnlock()
		if found && l.pack == p.idx && l.off == off {
			if _, err := io.Copy(w, io.NewSectionReader(p.f, off, r.hdrLen+r.size)); err != nil {
				return err
			}
			l.off = newOff
			moved = append(moved, keyLoc{r.key, l})
			newOff += r.hdrLen + r.size
		}
		off += r.hdrLen + r.size
	}
	var np *pack
	if len(moved) > 0 {
		if err := w.Flush(); err != nil {
			return err
		}
		base := strings.TrimPrefix(filepath.Base(tmp.Name()), ".tmp-")
		path := filepath.Join(dir, base+"c"+packExt)
		for n := 0; ; n++ {
			if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
				break
			}
			path = filepath.Join(dir, fmt.Sprintf("%sc%d%s", base, n, packExt))
		}
		if err := s.install(tmp, dir, path); err != nil {
			return err
		}
		done = true
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		np = &pack{path: path, f: f, scannedTo: newOff, seenSize: newOff}
	}
	if err := os.Remove(p.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := s.syncDir(dir); err != nil {
		return err
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	p.gone = true
	p.f.Close()
	delete(t.byName, filepath.Base(p.path))
	t.changed = true
	if np != nil {
		s.addPack(t, np)
		for _, m := range moved {
			m.l.pack = np.idx
			t.put(m.key, m.l)
		}
	}
	return nil
}
