// Package natsblob is a blob driver over a JetStream object store (nats.go's
// jetstream.ObjectStore): each object is a named entry "<tenant>/sha256/<hex>" of a
// bucket, its chunks and metadata messages of the bucket's stream. The all-in-one mode
// keeps its small artifacts here, in the embedded server's own files, instead of creating
// a file (and a metadata file) per artifact; blob.Tiered sends the large ones to the
// file driver.
//
// Objects are content-addressed and verified on every read like every driver's: the
// stored bytes must hash to the key, and hold the size recorded at write time
// (blob.NewVerifyingReader). The media type is the object's metadata. A Put buffers the
// object in memory, since its name is only known once every byte is hashed, so this
// driver is meant for small objects: its default size limit is DefaultMaxSize.
package natsblob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// DefaultMaxSize is the size limit of a store whose Options name none. Larger objects
// belong in a driver that streams them (blob.Tiered).
const DefaultMaxSize int64 = 8 << 20

// DefaultBucket is the object store bucket a store uses unless told otherwise.
const DefaultBucket = "tribunal_blobs"

// maxChunk is the object store's default chunk size, the largest chunk a Put writes.
const maxChunk = 128 << 10

// metaMediaType is the object metadata key holding the media type.
const metaMediaType = "media-type"

// Options configure a Store.
type Options struct {
	// Bucket names the object store bucket; DefaultBucket when empty. It is created
	// unless it exists.
	Bucket string
	// MaxSize caps each object in bytes; DefaultMaxSize when zero or negative.
	MaxSize int64
	// Storage is the bucket's storage; file storage unless set.
	Storage jetstream.StorageType
}

// Store keeps objects in a JetStream object store. It is safe for concurrent use.
type Store struct {
	js      jetstream.JetStream
	obs     jetstream.ObjectStore
	stream  jetstream.Stream
	bucket  string
	maxSize int64
	closed  atomic.Bool
	// infos caches what an object's metadata says, by ref (see remember).
	infos infoCache
	// locks serialise the exists check and the write of Puts of one key in this process,
	// so concurrent Puts of the same bytes store them once and agree on the media type.
	locks [64]sync.Mutex
}

var _ blob.Store = (*Store)(nil)

// info is what a read needs of an object's metadata: its size and media type, and where
// its chunks are.
type info struct {
	attrs  blob.Attrs
	nuid   string
	chunks uint32
}

// New opens (creating if needed) the object store bucket on js.
func New(ctx context.Context, js jetstream.JetStream, opts Options) (*Store, error) {
	bucket := opts.Bucket
	if bucket == "" {
		bucket = DefaultBucket
	}
	maxSize := opts.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	obs, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Storage: opts.Storage,
			Description: "tribunal artifacts, content-addressed: <tenant>/sha256/<hex>"})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obs, err = js.ObjectStore(ctx, bucket) // another process created it first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsblob: bucket %s: %w", bucket, err)
	}
	stream, err := js.Stream(ctx, StreamName(bucket))
	if err != nil {
		return nil, fmt.Errorf("natsblob: bucket %s: %w", bucket, err)
	}
	return &Store{js: js, obs: obs, stream: stream, bucket: bucket, maxSize: maxSize}, nil
}

// StreamName is the stream holding a bucket's objects (the object store's layout).
func StreamName(bucket string) string { return "OBJ_" + bucket }

// ChunkSubject is the subject of an object's chunks (the object store's layout).
func ChunkSubject(bucket, nuid string) string { return "$O." + bucket + ".C." + nuid }

// Bucket returns the object store bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// MaxSize returns the per-object size limit in bytes.
func (s *Store) MaxSize() int64 { return s.maxSize }

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return errors.New("natsblob: store is closed")
	}
	return ctx.Err()
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, tenant string, r io.Reader, opts blob.PutOptions) (blob.Attrs, error) {
	if err := s.check(ctx); err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: put: %w", err)
	}
	mediaType, expected, err := blob.NormalizePut(tenant, opts)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: put: %w", err)
	}
	var buf bytes.Buffer
	n, sum, err := blob.DigestCopy(ctx, &buf, r, s.maxSize)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: put %s: %w", tenant, err)
	}
	if err := blob.CheckExpected(tenant, expected, sum); err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: put: %w", err)
	}
	ref := blob.Ref{Tenant: tenant, SHA256: sum}
	mu := s.lock(ref)
	mu.Lock()
	defer mu.Unlock()
	// Same bytes already stored: keep the first writer's media type so that every
	// caller sees the same Attrs for the same ref.
	old, err := s.info(ctx, ref)
	switch {
	case err == nil && old.attrs.Size == n:
		return old.attrs, nil
	case err == nil:
		// A stored object of the wrong length is damaged: the bytes below are known to
		// hash right and replace it.
		s.forget(ref)
	case !errors.Is(err, blob.ErrNotFound):
		return blob.Attrs{}, fmt.Errorf("natsblob: put %s: %w", ref, err)
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: put %s: %w", ref, err)
	}
	meta := jetstream.ObjectMeta{Name: ref.Key(), Metadata: map[string]string{metaMediaType: mediaType}}
	var in info
	if n <= maxChunk {
		in, err = s.putSmall(ctx, ref, meta, buf.Bytes())
	} else {
		var oi *jetstream.ObjectInfo
		if oi, err = s.obs.Put(ctx, meta, &buf); err == nil {
			in = info{nuid: oi.NUID, chunks: oi.Chunks}
		}
	}
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: put %s: %w", ref, err)
	}
	if old.nuid != "" {
		// The damaged copy's chunks.
		_ = s.stream.Purge(ctx, jetstream.WithPurgeSubject(ChunkSubject(s.bucket, old.nuid)))
	}
	in.attrs = blob.Attrs{Ref: ref, Size: n, MediaType: mediaType}
	s.remember(in)
	return in.attrs, nil
}

// putSmall writes an object of at most one chunk as the object store lays it out (its
// chunk, then its metadata replacing any earlier one: ADR-20), so the object store reads
// it like any other. ObjectStore.Put would do the same over a JetStream context and a
// reply subscription of its own, created and removed for every object, a cost that
// showed in the server's CPU profile for thousands of small artifacts; here both
// messages go out on the shared context and their acks are awaited together.
func (s *Store) putSmall(ctx context.Context, ref blob.Ref, meta jetstream.ObjectMeta, data []byte) (info, error) {
	in := info{nuid: nuid.Next()}
	h := sha256.New()
	h.Write(data)
	oi := jetstream.ObjectInfo{ObjectMeta: meta, Bucket: s.bucket, NUID: in.nuid, Size: uint64(len(data)),
		Digest: jetstream.GetObjectDigestValue(h)}
	var acks []jetstream.PubAckFuture
	if len(data) > 0 {
		in.chunks, oi.Chunks = 1, 1
		oi.Opts = &jetstream.ObjectMetaOptions{ChunkSize: uint32(len(data))}
		f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: ChunkSubject(s.bucket, in.nuid), Data: data})
		if err != nil {
			return in, err
		}
		acks = append(acks, f)
	}
	mm := nats.NewMsg(metaSubject(s.bucket, ref.Key()))
	mm.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	var err error
	if mm.Data, err = json.Marshal(oi); err != nil {
		return in, err
	}
	f, err := s.js.PublishMsgAsync(mm)
	if err != nil {
		return in, err
	}
	acks = append(acks, f)
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			_ = s.stream.Purge(context.WithoutCancel(ctx), jetstream.WithPurgeSubject(ChunkSubject(s.bucket, in.nuid)))
			return in, err
		case <-ctx.Done():
			return in, ctx.Err()
		}
	}
	return in, nil
}

// metaSubject is the subject of an object's metadata (the object store's layout).
func metaSubject(bucket, name string) string {
	return "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// Open implements blob.Store. An object of one chunk (every object under the chunk size,
// 128 KiB) is read with one direct get of its chunk; a larger one streams through the
// object store's reader.
func (s *Store) Open(ctx context.Context, ref blob.Ref) (io.ReadCloser, blob.Attrs, error) {
	if err := s.check(ctx); err != nil {
		return nil, blob.Attrs{}, fmt.Errorf("natsblob: open %s: %w", ref, err)
	}
	if err := ref.Validate(); err != nil {
		return nil, blob.Attrs{}, fmt.Errorf("natsblob: open: %w", err)
	}
	in, err := s.info(ctx, ref)
	if err != nil {
		return nil, blob.Attrs{}, fmt.Errorf("natsblob: open %s: %w", ref, err)
	}
	var raw io.ReadCloser
	switch {
	case in.chunks == 0:
		raw = io.NopCloser(bytes.NewReader(nil))
	case in.chunks == 1:
		m, err := s.stream.GetLastMsgForSubject(ctx, ChunkSubject(s.bucket, in.nuid))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				// Metadata without its chunk: the object was replaced since it was cached,
				// or damaged; read what the metadata says now.
				s.forget(ref)
				err = fmt.Errorf("chunk %s: %w", in.nuid, blob.ErrNotFound)
			}
			return nil, blob.Attrs{}, fmt.Errorf("natsblob: open %s: %w", ref, err)
		}
		raw = io.NopCloser(bytes.NewReader(m.Data))
	default:
		res, err := s.obs.Get(ctx, ref.Key())
		if err != nil {
			return nil, blob.Attrs{}, fmt.Errorf("natsblob: open %s: %w", ref, notFound(err))
		}
		raw = &objReader{r: res, ref: ref}
	}
	return blob.NewVerifyingReader(raw, in.attrs), in.attrs, nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, ref blob.Ref) (blob.Attrs, error) {
	if err := s.check(ctx); err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: stat %s: %w", ref, err)
	}
	if err := ref.Validate(); err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: stat: %w", err)
	}
	in, err := s.info(ctx, ref)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("natsblob: stat %s: %w", ref, err)
	}
	return in.attrs, nil
}

// Close implements blob.Store. Later calls fail, so use-after-close bugs surface; the
// connection is the caller's.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// info reads an object's metadata, from the cache when it holds the ref.
func (s *Store) info(ctx context.Context, ref blob.Ref) (info, error) {
	if in, ok := s.infos.get(ref); ok {
		return in, nil
	}
	oi, err := s.obs.GetInfo(ctx, ref.Key())
	if err != nil {
		return info{}, notFound(err)
	}
	mediaType := oi.Metadata[metaMediaType]
	if mediaType == "" {
		mediaType = blob.DefaultMediaType
	}
	in := info{attrs: blob.Attrs{Ref: ref, Size: int64(oi.Size), MediaType: mediaType}, nuid: oi.NUID, chunks: oi.Chunks}
	s.remember(in)
	return in, nil
}

// remember caches an object's metadata. An object's bytes never change under its digest,
// and its metadata only when a damaged copy is replaced, which forgets the entry.
func (s *Store) remember(in info) { s.infos.put(in) }

func (s *Store) forget(ref blob.Ref) { s.infos.drop(ref) }

// maxCachedInfos bounds the metadata cache: about 250 bytes an entry.
const maxCachedInfos = 1 << 17

// infoCache holds the metadata of the objects stored or read last, in two generations:
// when the current one is full it becomes the previous one, and the one before is
// dropped. A batch's artifacts are read by the later stages a while after they were
// stored, in about the same order, so what is dropped is what the pipeline is done with;
// dropping everything at once instead made every read of a 100,000-AC batch after the
// first 130,000 objects fetch and decode the metadata again.
type infoCache struct {
	mu        sync.RWMutex
	cur, prev map[blob.Ref]info
}

func (c *infoCache) get(ref blob.Ref) (info, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if in, ok := c.cur[ref]; ok {
		return in, true
	}
	in, ok := c.prev[ref]
	return in, ok
}

func (c *infoCache) put(in info) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || len(c.cur) >= maxCachedInfos/2 {
		c.prev, c.cur = c.cur, make(map[blob.Ref]info)
	}
	c.cur[in.attrs.Ref] = in
}

func (c *infoCache) drop(ref blob.Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cur, ref)
	delete(c.prev, ref)
}

func (s *Store) lock(ref blob.Ref) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(ref.Key()))
	return &s.locks[h.Sum32()%uint32(len(s.locks))]
}

// notFound maps the object store's "no such object" to blob.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: %v", blob.ErrNotFound, err)
	}
	return err
}

// objReader passes an object store reader on, reporting the store's own digest check
// as blob.ErrDigestMismatch.
type objReader struct {
	r   jetstream.ObjectResult
	ref blob.Ref
}

func (o *objReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		err = fmt.Errorf("%w: %s: %v", blob.ErrDigestMismatch, o.ref, err)
	}
	return n, err
}

func (o *objReader) Close() error { return o.r.Close() }
