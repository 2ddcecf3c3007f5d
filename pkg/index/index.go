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
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// MediaType is the stored index's media type: gzip-compressed msgpack entries, back to
// back, with the JSON field names.
const MediaType = "application/vnd.tribunal.index+msgpack+gzip"

// Entry is one job of a batch.
type Entry struct {
	kind.Row
	// Index is the job's position in its batch.
	Index     int            `json:"index"`
	Criterion string         `json:"criterion,omitempty"`
	Calls     []records.Call `json:"calls,omitempty"`
}

// Of is a job's entry, its row as its kind reads it.
func Of(j *records.Job) Entry {
	row := kind.BaseRow(j)
	if k, err := kinds.Lookup(j.Spec.Kind); err == nil {
		row = k.Row(j)
	}
	return Entry{Row: row, Index: j.Index, Criterion: j.Spec.Criterion, Calls: j.Calls}
}

// Builder writes an index one entry at a time, holding only the compressed bytes.
type Builder struct {
	buf bytes.Buffer
	zw  *gzip.Writer
	enc *msgpack.Encoder
	n   int
	err error
}

// NewBuilder starts an index.
func NewBuilder() *Builder {
	b := &Builder{}
	b.zw = gzip.NewWriter(&b.buf)
	b.enc = msgpack.NewEncoder(b.zw)
	b.enc.SetCustomStructTag("json")
	b.enc.SetOmitEmpty(true)
	return b
}

// Add appends an entry.
func (b *Builder) Add(e Entry) {
	if b.err != nil {
		return
	}
	if err := b.enc.Encode(&e); err != nil {
		b.err = fmt.Errorf("index entry %s: %w", e.ACID, err)
		return
	}
	b.n++
}

// Len is how many entries were added.
func (b *Builder) Len() int { return b.n }

// Bytes finishes the index and returns its stored form.
func (b *Builder) Bytes() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := b.zw.Close(); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return b.buf.Bytes(), nil
}

// Decode reads a stored index, its entries in batch order.
func Decode(data []byte) ([]Entry, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	dec := msgpack.NewDecoder(zr)
	dec.SetCustomStructTag("json")
	var out []Entry
	for {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("index entry %d: %w", len(out), err)
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}
