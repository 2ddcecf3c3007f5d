package index

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// The stored form (v4, and each chunk of a v5 index: chunk.go) is a string table followed
// by the entries, each a fixed sequence of
// varints (strings as indexes into the table), all gzip-compressed. A batch's entries
// repeat the same few values (kinds, statuses, judges, the routes, the criteria and gaps
// of similar ACs), so interning them keeps the index small, and reading it needs no
// reflection: 100,000 entries decode in tens of milliseconds, where a generic encoder
// took seconds. TestEveryFieldRoundTrips fails when a field of Entry is not encoded.

// magic starts an index and names its version; magicV3 is the version before repeated
// trials and magicV2 the one before costs, both still read (their entries have none).
var magic, magicV3, magicV2 = []byte("TRIBIDX4"), []byte("TRIBIDX3"), []byte("TRIBIDX2")

// magicV5 starts a chunked index (chunk.go): v4 indexes of up to ChunkSize entries each,
// in batch order, gzip-compressed one by one behind a directory, so a page of a batch's
// table reads the chunks it shows and not the rest.
var magicV5 = []byte("TRIBIDX5")

// encoder writes entries' fields into one buffer and interns their strings, or, inline,
// writes each string where it is used (a Builder's spilled entries: interning them would
// keep every AC id and criterion of the batch in one table until the index is written).
type encoder struct {
	strings map[string]uint64
	table   []string
	inline  bool
	body    bytes.Buffer
	tmp     [binary.MaxVarintLen64]byte
}

func newEncoder() *encoder {
	return &encoder{strings: map[string]uint64{"": 0}, table: []string{""}}
}

func (e *encoder) uint(v uint64) {
	n := binary.PutUvarint(e.tmp[:], v)
	e.body.Write(e.tmp[:n])
}

func (e *encoder) int(v int64) {
	n := binary.PutVarint(e.tmp[:], v)
	e.body.Write(e.tmp[:n])
}

func (e *encoder) str(s string) {
	if e.inline {
		e.uint(uint64(len(s)))
		e.body.WriteString(s)
		return
	}
	i, ok := e.strings[s]
	if !ok {
		i = uint64(len(e.table))
		e.strings[s] = i
		e.table = append(e.table, s)
	}
	e.uint(i)
}

func (e *encoder) bool(b bool) {
	if b {
		e.body.WriteByte(1)
	} else {
		e.body.WriteByte(0)
	}
}

// present writes the presence byte of an optional value (1 when ok) and returns ok.
func (e *encoder) present(ok bool) bool {
	e.bool(ok)
	return ok
}

// optFloat, optBool and optInt write a presence byte first.
func (e *encoder) optFloat(f *float64) {
	if !e.present(f != nil) {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(*f))
	e.body.Write(b[:])
}

func (e *encoder) optBool(b *bool) {
	switch {
	case b == nil:
		e.body.WriteByte(0)
	case *b:
		e.body.WriteByte(2)
	default:
		e.body.WriteByte(1)
	}
}

func (e *encoder) optInt(i *int) {
	if e.present(i != nil) {
		e.int(int64(*i))
	}
}

func (e *encoder) entry(x *Entry) {
	e.int(int64(x.Index))
	r := &x.Row
	for _, s := range []string{r.ACID, r.Kind, r.Status, r.Winner, r.Tag, r.Impact, r.LabelAssignment, r.RawWinner, r.BiggestGap,
		r.Agreement, r.Slots, r.Verdict, r.Detail, r.Reason, r.Judge, x.Criterion} {
		e.str(s)
	}
	e.optFloat(r.Confidence)
	e.optBool(r.Consistent)
	e.optInt(r.Quality)
	e.bool(r.Cached)
	e.bool(r.Unpinned)
	e.uint(uint64(len(r.Sampling)))
	for i := range r.Sampling {
		js := &r.Sampling[i]
		e.str(js.Judge)
		var t *float64
		if js.Temperature != nil {
			f := float64(*js.Temperature)
			t = &f
		}
		e.optFloat(t)
		e.optInt(js.Seed)
		e.int(int64(js.MaxTokens))
		e.str(js.ResponseFormat)
		e.str(js.ReportedModel)
	}
	if c := r.Cost; e.present(c != nil) {
		e.int(int64(c.Cost))
		e.int(int64(c.Priced))
		e.int(int64(c.Unpriced))
		e.int(int64(c.Saved))
		e.int(int64(c.CacheHits))
		e.int(int64(c.Recorded))
		e.int(c.PromptTokens)
		e.int(c.CachedPromptTokens)
		e.int(c.CompletionTokens)
	}
	// A row's trials, ladder and doubts: rare, nested, and read only with the row, so
	// kept as one JSON string ("" for none).
	rep := ""
	if r.Trials != nil || r.Ladder != nil || len(r.Unsure) > 0 {
		data, _ := json.Marshal(repeatsJSON{r.Trials, r.Ladder, r.Unsure})
		rep = string(data)
	}
	e.str(rep)
	e.uint(uint64(len(x.Calls)))
	for i := range x.Calls {
		c := &x.Calls[i]
		e.str(c.Judge)
		e.str(c.Label)
		e.str(string(c.Status))
		e.int(int64(c.PromptTokens))
		e.int(int64(c.CompletionTokens))
		e.int(c.LatencyMillis)
		e.bool(c.Cached)
		e.int(int64(c.CachedPromptTokens))
		e.bool(c.Batch)
		e.bool(c.Priced)
		e.int(c.CostNanos)
		e.int(c.SavedNanos)
		e.str(c.PriceTable)
		e.str(c.BudgetRefused)
		if !e.present(c.Record != nil) {
			continue
		}
		e.str(c.Record.SHA256)
		e.str(c.Record.MediaType)
		e.int(c.Record.Size)
	}
}

// writeTo writes an index (a v4 one, or a chunk of a v5 one): magic, entry count, string
// table, entries (each body each hands over, one entry's encoding).
func (e *encoder) writeTo(w io.Writer, n int, each func(func([]byte) error) error) error {
	bw := bufio.NewWriter(w)
	bw.Write(magic)
	var tmp [binary.MaxVarintLen64]byte
	put := func(v uint64) { bw.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	put(uint64(n))
	put(uint64(len(e.table)))
	for _, s := range e.table {
		put(uint64(len(s)))
		bw.WriteString(s)
	}
	if err := each(func(body []byte) error {
		_, err := bw.Write(body)
		return err
	}); err != nil {
		return err
	}
	return bw.Flush()
}

// errCorrupt marks an index that does not decode.
var errCorrupt = errors.New("corrupt index")

// decoder reads an index from its uncompressed bytes. The values entries point at
// (confidences, calls, ...) are carved out of shared slabs: 100,000 entries then cost a
// few hundred allocations, not hundreds of thousands.
type decoder struct {
	data  []byte
	pos   int
	table []string
	err   error

	floats []float64
	bools  []bool
	ints   []int
	calls  []records.Call
	blobs  []events.Blob
	// v2 reads an index written before costs, v3 one before repeated trials.
	v2, v3 bool
	// slab is how many values a slab holds (slabSize, or fewer for a small index).
	slab int
	// inline reads strings written where they are used (encoder.inline), each made once
	// per distinct value held in seen.
	inline bool
	seen   map[string]string
}

// repeatsJSON is how an entry keeps its row's trials, ladder and doubts.
type repeatsJSON struct {
	Trials *events.TrialsResult `json:"t,omitempty"`
	Ladder *events.LadderResult `json:"l,omitempty"`
	Unsure []string             `json:"u,omitempty"`
}

// slabSize is how many values one slab allocation holds, at most: an index of fewer
// entries (a chunk of a v5 one) takes slabs of its entry count, so a page that decodes
// one chunk does not allocate slabs for thousands.
const slabSize = 4096

func take[T any](slab *[]T, size int) *T {
	if len(*slab) == 0 {
		*slab = make([]T, size)
	}
	v := &(*slab)[0]
	*slab = (*slab)[1:]
	return v
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", errCorrupt, what, d.pos)
	}
}

func (d *decoder) uint() uint64 { return varint(d, binary.Uvarint) }

func (d *decoder) int() int64 { return varint(d, binary.Varint) }

// varint reads one varint with read (binary.Uvarint or binary.Varint); a bad one fails the
// decoder and ends it.
func varint[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	v, n := read(d.data[min(d.pos, len(d.data)):])
	if n <= 0 {
		d.fail("bad varint")
		d.pos = len(d.data)
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) byte() byte {
	if d.pos >= len(d.data) {
		d.fail("unexpected end")
		return 0
	}
	b := d.data[d.pos]
	d.pos++
	return b
}

func (d *decoder) str() string {
	if d.inline {
		l := d.uint()
		if l > uint64(len(d.data)-d.pos) {
			d.fail("string longer than the entry")
			d.pos = len(d.data)
			return ""
		}
		b := d.data[d.pos : d.pos+int(l)]
		d.pos += int(l)
		s, ok := d.seen[string(b)]
		if !ok {
			s = string(b)
			d.seen[s] = s
		}
		return s
	}
	i := d.uint()
	if i >= uint64(len(d.table)) {
		d.fail("string index out of range")
		return ""
	}
	return d.table[i]
}

func (d *decoder) optFloat() *float64 {
	if d.byte() == 0 {
		return nil
	}
	if d.pos+8 > len(d.data) {
		d.fail("unexpected end")
		return nil
	}
	f := take(&d.floats, d.slab)
	*f = math.Float64frombits(binary.LittleEndian.Uint64(d.data[d.pos:]))
	d.pos += 8
	return f
}

func (d *decoder) optBool() *bool {
	b := d.byte()
	if b == 0 {
		return nil
	}
	v := take(&d.bools, d.slab)
	*v = b == 2
	return v
}

func (d *decoder) optInt() *int {
	if d.byte() == 0 {
		return nil
	}
	i := take(&d.ints, d.slab)
	*i = int(d.int())
	return i
}

func (d *decoder) entry(x *Entry) {
	x.Index = int(d.int())
	r := &x.Row
	for _, p := range []*string{&r.ACID, &r.Kind, &r.Status, &r.Winner, &r.Tag, &r.Impact, &r.LabelAssignment, &r.RawWinner, &r.BiggestGap,
		&r.Agreement, &r.Slots, &r.Verdict, &r.Detail, &r.Reason, &r.Judge, &x.Criterion} {
		*p = d.str()
	}
	r.Confidence = d.optFloat()
	r.Consistent = d.optBool()
	r.Quality = d.optInt()
	r.Cached = d.byte() == 1
	r.Unpinned = d.byte() == 1
	ns := d.uint()
	if ns > uint64(len(d.data)) {
		d.fail("sampling count out of range")
		return
	}
	if ns > 0 {
		r.Sampling = make([]kind.JudgeSampling, ns)
	}
	for i := range r.Sampling {
		js := &r.Sampling[i]
		js.Judge = d.str()
		if t := d.optFloat(); t != nil {
			f := float32(*t)
			js.Temperature = &f
		}
		js.Seed = d.optInt()
		js.MaxTokens = int(d.int())
		js.ResponseFormat, js.ReportedModel = d.str(), d.str()
	}
	if !d.v2 && d.byte() == 1 {
		r.Cost = &price.Sum{Cost: price.Money(d.int()), Priced: int(d.int()), Unpriced: int(d.int()), Saved: price.Money(d.int()), CacheHits: int(d.int()),
			Recorded: int(d.int()), PromptTokens: d.int(), CachedPromptTokens: d.int(), CompletionTokens: d.int()}
	}
	if !d.v3 {
		if s := d.str(); s != "" {
			var rj repeatsJSON
			if err := json.Unmarshal([]byte(s), &rj); err != nil {
				d.fail("row trials: " + err.Error())
				return
			}
			r.Trials, r.Ladder, r.Unsure = rj.Trials, rj.Ladder, rj.Unsure
		}
	}
	n := d.uint()
	if n > uint64(len(d.data)) {
		d.fail("call count out of range")
		return
	}
	if n > 0 {
		if uint64(len(d.calls)) < n {
			d.calls = make([]records.Call, max(d.slab, int(n)))
		}
		x.Calls = d.calls[:n:n]
		d.calls = d.calls[n:]
	}
	for i := range x.Calls {
		c := &x.Calls[i]
		c.Judge, c.Label, c.Status = d.str(), d.str(), events.VoteStatus(d.str())
		c.PromptTokens, c.CompletionTokens, c.LatencyMillis = int(d.int()), int(d.int()), d.int()
		c.Cached = d.byte() == 1
		if !d.v2 {
			c.CachedPromptTokens = int(d.int())
			c.Batch, c.Priced = d.byte() == 1, d.byte() == 1
			c.CostNanos, c.SavedNanos = d.int(), d.int()
			c.PriceTable, c.BudgetRefused = d.str(), d.str()
		}
		if d.byte() == 1 {
			b := take(&d.blobs, d.slab)
			b.SHA256, b.MediaType, b.Size = d.str(), d.str(), d.int()
			c.Record = b
		}
	}
}

func decodeAll(data []byte) ([]Entry, error) {
	v2 := bytes.HasPrefix(data, magicV2)
	v3 := v2 || bytes.HasPrefix(data, magicV3)
	if !bytes.HasPrefix(data, magic) && !v3 {
		return nil, fmt.Errorf("%w: not an index (or another version of one)", errCorrupt)
	}
	d := &decoder{data: data, pos: len(magic), v2: v2, v3: v3}
	n, size := d.uint(), d.uint()
	if d.err != nil || size > uint64(len(data)) || n > uint64(len(data)) {
		return nil, fmt.Errorf("%w: bad header", errCorrupt)
	}
	d.slab = int(min(max(n, 16), slabSize))
	// One string holds the whole table (one allocation); each entry is a slice of it.
	type span struct{ from, to int }
	spans := make([]span, size)
	var text []byte
	for i := range spans {
		l := d.uint()
		if d.err != nil || uint64(d.pos)+l > uint64(len(data)) {
			return nil, fmt.Errorf("%w: string %d", errCorrupt, i)
		}
		spans[i] = span{len(text), len(text) + int(l)}
		text = append(text, data[d.pos:d.pos+int(l)]...)
		d.pos += int(l)
	}
	all := string(text)
	d.table = make([]string, size)
	for i, sp := range spans {
		d.table[i] = all[sp.from:sp.to]
	}
	out := make([]Entry, n)
	for i := range out {
		d.entry(&out[i])
		if d.err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, d.err)
		}
	}
	if d.pos != len(data) {
		return nil, fmt.Errorf("%w: %d bytes after the last entry", errCorrupt, len(data)-d.pos)
	}
	return out, nil
}
