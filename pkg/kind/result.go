package kind

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
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
// whatever order the jobs are folded in.
type ListFold[R any] struct {
	m     ListManifest[R]
	index []int
	row   func(*records.Job) R
}

// NewListFold starts the list manifest of a batch whose rows row makes.
func NewListFold[R any](k events.Kind, batch string, row func(*records.Job) R) *ListFold[R] {
	return &ListFold[R]{m: ListManifest[R]{ManifestHeader: ManifestHeader{Kind: k, Source: "tribunal", BatchID: batch}}, row: row}
}

// Add implements Manifest.
func (f *ListFold[R]) Add(j *records.Job) {
	f.index = append(f.index, j.Index)
	f.m.Results = append(f.m.Results, f.row(j))
}

// Build implements Manifest: a *ListManifest[R], nil when no job was added.
func (f *ListFold[R]) Build(at time.Time) any {
	if len(f.m.Results) == 0 {
		return nil
	}
	f.m.GeneratedAt = at.UTC()
	sort.Sort((*byIndex[R])(f))
	return &f.m
}

type byIndex[R any] ListFold[R]

func (b *byIndex[R]) Len() int           { return len(b.index) }
func (b *byIndex[R]) Less(i, j int) bool { return b.index[i] < b.index[j] }
func (b *byIndex[R]) Swap(i, j int) {
	b.index[i], b.index[j] = b.index[j], b.index[i]
	b.m.Results[i], b.m.Results[j] = b.m.Results[j], b.m.Results[i]
}
