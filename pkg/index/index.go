// Package index is a batch's index: one compact entry per job (its row as people read
// it, its criterion and its judge calls), written once when the batch completes and
// stored as a blob beside the manifests. The console's tables, filters, charts and
// comparisons read it instead of every job record of the batch, which for 100,000 jobs
// takes seconds on every page.
//
// The index is a read model: it holds no decision of its own and the audit does not
// check it (the records and events it is built from are checked).
package index

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// MediaType is the stored index's media type (the format is in codec.go).
const MediaType = "application/vnd.tribunal.index+gzip"

// Entry is one job of a batch.
type Entry struct {
	kind.Row
	// Index is the job's position in its batch.
	Index     int            `json:"index"`
	Criterion string         `json:"criterion,omitempty"`
	Calls     []records.Call `json:"calls,omitempty"`
}

// Of is a job's entry, its row as its kind reads it. A row is marked cached when a call
// its verdict came from was answered from the judge-call cache, whatever its kind: the
// table's "(cached)" and results.json's cached mean the same for every kind.
func Of(j *records.Job) Entry {
	row := kind.BaseRow(j)
	if k, err := kind.Lookup(j.Spec.Kind); err == nil {
		row = k.Row(j)
	}
	for _, c := range j.Calls {
		row.Cached = row.Cached || c.Cached
	}
	if cost := j.Cost(); !cost.Zero() {
		row.Cost = &cost
	}
	return Entry{Row: row, Index: j.Index, Criterion: j.Spec.Criterion, Calls: j.Calls}
}

// Builder writes an index one entry at a time. Each entry's encoding, its strings
// inline, is written out as it is added (pkg/spillsort, in $TMPDIR) and sorted into
// batch order when the index is written, a chunk's string table built as the chunk is,
// so a 1,000,000-job index is not held whole, decoded, encoded or interned: the builder
// holds the sorter's buffer and no string of the batch.
type Builder struct {
	enc  *encoder
	rows *spillsort.Sorter
	key  []byte
	n    int
}

// NewBuilder starts an index.
func NewBuilder() *Builder { return &Builder{enc: &encoder{inline: true}, rows: spillsort.New(nil)} }

// Add appends an entry.
func (b *Builder) Add(e Entry) {
	b.enc.body.Reset()
	b.enc.entry(&e)
	b.key = spillsort.IntKey(b.key[:0], e.Index)
	b.rows.Add(b.key, b.enc.body.Bytes())
	b.n++
}

// Len is how many entries were added.
func (b *Builder) Len() int { return b.n }

// Bytes finishes the index and returns its stored form.
func (b *Builder) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write finishes the index and writes its stored form to w: chunks of entries in batch
// order (chunk.go). The builder can write it again, or take more entries.
func (b *Builder) Write(w io.Writer) error {
	err := writeChunked(w, b.n, func(fn func([]byte) error) error {
		return b.rows.Each(func(_, body []byte) error { return fn(body) })
	})
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// Close lets go of the builder's spilled entries.
func (b *Builder) Close() error { return b.rows.Close() }

// Decode reads a stored index, its entries in batch order.
func Decode(data []byte) ([]Entry, error) {
	if bytes.HasPrefix(data, magicV5) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, err
		}
		out := make([]Entry, 0, r.Len())
		err = r.Each(func(e *Entry) error {
			out = append(out, *e)
			return nil
		})
		return out, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	// The stored form compresses about tenfold: read it in one growing buffer.
	var raw bytes.Buffer
	raw.Grow(len(data) * 10)
	if _, err := io.Copy(&raw, zr); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	out, err := decodeAll(raw.Bytes())
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}
