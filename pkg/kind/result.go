package kind

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// Unmarshal reads a kind's part of a job record (its Result, or a looping kind's Loop),
// named what in errors ("critic result"); nil when the record has none yet. Between the
// record's Memoize and Forget it is decoded once and the value shared (records.Job.Memo).
func Unmarshal[T any](j *records.Job, data json.RawMessage, what string) (*T, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if v, ok := j.Memo(data).(*T); ok {
		return v, nil
	}
	var v T
	if err := records.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("job %s: %s: %w", j.Key(), what, err)
	}
	j.Remember(data, &v)
	return &v, nil
}

// Marshal writes a kind's part of a job record into *dst (j.Result or j.Loop), leaving
// it as it was when v does not encode.
func Marshal(j *records.Job, dst *json.RawMessage, what string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("job %s: encode %s: %w", j.Key(), what, err)
	}
	*dst = data
	return nil
}

// ManifestHeader opens every kind's manifest but ab's (whose shape is the seed's review
// manifest): which kind, from whom, for which batch and when.
type ManifestHeader struct {
	Kind        events.Kind `json:"kind"`
	Source      string      `json:"source"`
	BatchID     string      `json:"batch_id"`
	GeneratedAt time.Time   `json:"generated_at"`
}

// ListManifest is a manifest of one result per AC, in batch order (critic, equivalence).
type ListManifest[R any] struct {
	ManifestHeader
	Results []R `json:"results"`
}

// ManifestEntry is what every row of a list manifest says of its job, before the kind's
// own result.
type ManifestEntry struct {
	ACID   string        `json:"ac_id"`
	Status events.Status `json:"status"`
	Reason string        `json:"reason,omitempty"`
	Judges []string      `json:"judges,omitempty"`
}

// EntryOf is a final job's ManifestEntry.
func EntryOf(j *records.Job) ManifestEntry {
	return ManifestEntry{ACID: j.ACID, Status: j.Status, Reason: j.BlockReason, Judges: j.Judges}
}

// ListFold folds final jobs into a ListManifest, one row per job, listed in batch order
// whatever order the jobs are folded in. Each row is encoded as it is added and written
// out (pkg/spillsort), so the fold holds a bounded buffer of rows, not the batch's.
type ListFold[R any] struct {
	header ManifestHeader
	rows   *spillsort.Sorter
	row    func(*records.Job) R
	key    []byte
	// err is the first row that did not encode, reported when the manifest is (as
	// encoding it whole would have).
	err error
}

// NewListFold starts the list manifest of a batch whose rows row makes.
func NewListFold[R any](k events.Kind, batch string, row func(*records.Job) R) *ListFold[R] {
	return &ListFold[R]{header: ManifestHeader{Kind: k, Source: "tribunal", BatchID: batch}, rows: spillsort.New(nil), row: row}
}

// Add implements Manifest.
func (f *ListFold[R]) Add(j *records.Job) {
	data, err := json.Marshal(f.row(j))
	if err != nil {
		if f.err == nil {
			f.err = err
		}
		return
	}
	f.key = spillsort.IntKey(f.key[:0], j.Index)
	f.rows.Add(f.key, data)
}

// Build implements Manifest: the ListManifest[R]'s JSON, its rows read from where Add
// wrote them; nil when no job was added.
func (f *ListFold[R]) Build(at time.Time) any {
	if f.rows.Len() == 0 && f.err == nil {
		return nil
	}
	h := f.header
	return &listDoc{Kind: h.Kind, Source: h.Source, BatchID: h.BatchID, GeneratedAt: at.UTC(), Results: NewRows(func(fn func([]byte) error) error {
		if f.err != nil {
			return f.err
		}
		return f.rows.Each(func(_, row []byte) error { return fn(row) })
	})}
}

// Close lets go of the fold's rows.
func (f *ListFold[R]) Close() error { return f.rows.Close() }

// listDoc is a ListManifest as Build writes it: ManifestHeader's fields, in its order,
// then the rows (TestListFoldBatchOrder holds it to the manifest's encoding).
type listDoc struct {
	Kind        events.Kind `json:"kind"`
	Source      string      `json:"source"`
	BatchID     string      `json:"batch_id"`
	GeneratedAt time.Time   `json:"generated_at"`
	Results     Rows        `json:"results"`
}
