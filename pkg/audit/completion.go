package audit

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// complete re-derives one completion of a batch when the rules reach it in stream order:
// the first pass's, then one per finished redrive, each folded from the job records as
// they were at that moment (rulebook.Memory folds them then). Its summary, digest chain
// and each manifest are expected as the announcements of its attempt, and each manifest
// is compared with its stored blob byte for byte once its announcement is recorded: a
// completion carries the time of the input that completed it, so nothing in a manifest is
// left that a replay cannot re-derive. The latest completion is the one the batch header
// must keep.
func (a *auditor) complete(bk batchKey, b *simBatch, c *rulebook.Completion, by *Recorded) {
	rebuilt := map[events.Kind]uint64{}
	writers := map[events.Kind]*zstd.Encoder{}
	a.rebuilt.err = nil
	comp, err := c.Fold().CompleteHashed(c.By.ACID, c.Attempt, func(k events.Kind) io.Writer {
		id, w := a.rebuilt.create()
		rebuilt[k], writers[k] = id, a.zstd(w)
		return writers[k]
	})
	for _, w := range writers {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = a.rebuilt.err
	}
	if err != nil {
		for _, id := range rebuilt {
			a.rebuilt.drop(id)
		}
		a.add(Mismatch{Kind: KindMismatch, Tenant: bk.tenant, Batch: bk.batch, Field: "completion", Detail: err.Error()})
		return
	}
	b.completion = &comp
	for _, e := range rulebook.CompletionEvents(bk.tenant, bk.batch, &comp) {
		ex := expectation{ev: e, from: originOf(by), what: describe(e)}
		if m, ok := e.Payload.(*events.ManifestEmitted); ok {
			ex.manifest = rebuilt[m.Kind]
		}
		a.expect(ex)
	}
}

// rebuiltManifests are the manifests the audit rebuilt (compact JSON compressed with
// zstd) until their announcements are read: each in a temporary file of its own in dir,
// removed at once, as a 1,000,000-AC batch's ab manifest is about 1.1 GB of JSON and a
// tenth of that compressed. A manifest whose file could not be made is held in memory.
// An expectation names one by its id (0: none).
type rebuiltManifests struct {
	dir  string
	next uint64
	held map[uint64]*rebuiltManifest
	// err is the first write that failed of the completion being rebuilt.
	err error
}

type rebuiltManifest struct {
	f   *os.File
	mem *bytes.Buffer
}

// create starts a manifest and returns its id and where its bytes are written.
func (r *rebuiltManifests) create() (uint64, io.Writer) {
	if r.held == nil {
		r.held = map[uint64]*rebuiltManifest{}
	}
	r.next++
	m := &rebuiltManifest{}
	if f, err := os.CreateTemp(r.dir, "tribunal-manifest-*"); err == nil {
		if os.Remove(f.Name()) == nil {
			m.f = f
		} else {
			f.Close()
		}
	}
	r.held[r.next] = m
	if m.f == nil {
		m.mem = &bytes.Buffer{}
		return r.next, m.mem
	}
	return r.next, writerFunc(func(p []byte) (int, error) {
		n, err := m.f.Write(p)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("audit: keep a rebuilt manifest in %s: %w", r.dir, err)
		}
		return n, err
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// bytes reads manifest id back whole: only when a stored manifest differs, to name
// the fields that do.
func (r *rebuiltManifests) bytes(id uint64) ([]byte, error) {
	m := r.held[id]
	switch {
	case m == nil:
		return nil, fmt.Errorf("audit: rebuilt manifest %d is not held", id)
	case m.mem != nil:
		return m.mem.Bytes(), nil
	}
	if _, err := m.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("audit: read a rebuilt manifest back: %w", err)
	}
	return io.ReadAll(m.f)
}

// drop lets go of manifest id.
func (r *rebuiltManifests) drop(id uint64) {
	if m := r.held[id]; m != nil {
		if m.f != nil {
			m.f.Close()
		}
		delete(r.held, id)
	}
}

// dropAll lets go of every manifest still held (those no announcement was read for).
func (r *rebuiltManifests) dropAll() {
	for id := range r.held {
		r.drop(id)
	}
}

// checkManifest reads the stored manifest a recorded announcement names back and
// compares it with the rebuilt one (rebuilt: its address, size and media type;
// compressed: its compact JSON, zstd). When the announcement names the rebuilt
// manifest's address the blob is only streamed through its digest check; only a
// different one is read whole, to name the fields that differ. Either way the store
// must keep it with the media type the aggregator wrote it with: readers (`tribunal
// results`, the ingress, the console) serve it under the store's.
func (a *auditor) checkManifest(bk batchKey, rec *Recorded, from origin, rebuilt events.Blob, id uint64) {
	defer a.rebuilt.drop(id)
	p := rec.Event.Payload.(*events.ManifestEmitted)
	k, stored := p.Kind, p.Manifest
	if a.store == nil {
		a.note(bk, "stored manifests", "the audit was given no blob store")
		return
	}
	unreadable := func(err error) {
		a.add(a.at(rec, Mismatch{Kind: KindUnreadable, Field: "manifest", Recorded: stored.SHA256,
			Detail: fmt.Sprintf("the stored %s manifest cannot be read back intact: %v", k, err)}))
	}
	ctx, cancel := a.blobContext()
	defer cancel()
	ref := blob.Ref{Tenant: bk.tenant, SHA256: stored.SHA256}
	kept := func(attrs blob.Attrs, sized bool) {
		a.decided(bk)
		if sized && attrs.Size != rebuilt.Size {
			a.add(a.at(rec, with(Mismatch{}, KindMismatch, "manifest.size", fmt.Sprint(attrs.Size), fmt.Sprint(rebuilt.Size)).
				withDetail(fmt.Sprintf("the blob store holds the %s manifest with another size than the aggregator wrote", k))))
		}
		if attrs.MediaType != rebuilt.MediaType {
			a.add(a.at(rec, with(Mismatch{}, KindMismatch, "manifest.media_type", attrs.MediaType, rebuilt.MediaType).
				withDetail(fmt.Sprintf("the blob store keeps the %s manifest under another media type than the aggregator wrote", k))))
		}
	}
	if stored.SHA256 == rebuilt.SHA256 {
		attrs, err := readThrough(ctx, a.store, ref)
		if err != nil {
			unreadable(err)
			return
		}
		kept(attrs, true)
		return
	}
	data, attrs, err := blob.ReadAll(ctx, a.store, ref)
	if err != nil {
		unreadable(err)
		return
	}
	// Other bytes than the rebuilt manifest's have another size: only the media type
	// says something beyond the field diff below.
	kept(attrs, false)
	compressed, err := a.rebuilt.bytes(id)
	var compact []byte
	if err == nil {
		compact, err = a.zstdDecoder().DecodeAll(compressed, nil)
	}
	if err == nil {
		var diffs []fieldDiff
		if diffs, err = diffJSON(data, compact); err == nil {
			for _, d := range diffs {
				m := a.at(rec, with(Mismatch{}, KindMismatch, "manifest("+string(k)+")."+d.path, d.recorded, d.derived))
				m.FromID, m.FromType, m.FromSeq = from.id, from.typ, from.seq
				a.add(m)
			}
			return
		}
	}
	a.add(a.at(rec, Mismatch{Kind: KindMismatch, Field: "manifest", Detail: err.Error()}))
}

// zstd compresses a rebuilt manifest into w: the audit keeps it so until its
// announcement is read (rebuiltManifests).
func (a *auditor) zstd(w io.Writer) *zstd.Encoder {
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	if err != nil {
		panic("audit: zstd encoder: " + err.Error())
	}
	return enc
}

func (a *auditor) zstdDecoder() *zstd.Decoder {
	if a.zdec == nil {
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			panic("audit: zstd decoder: " + err.Error())
		}
		a.zdec = dec
	}
	return a.zdec
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// note records, once per batch, something that is not re-derivable.
func (a *auditor) note(bk batchKey, what, why string) {
	key := bk.tenant + "/" + bk.batch + "/" + what
	if a.noted[key] {
		return
	}
	a.noted[key] = true
	a.rep.Unverified = append(a.rep.Unverified, Unverified{Tenant: bk.tenant, Batch: bk.batch, What: what, Why: why})
	a.unverifiedAt = append(a.unverifiedAt, a.visiting)
}
