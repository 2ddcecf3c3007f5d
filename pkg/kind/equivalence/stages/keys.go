package stages

import (
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Entry is an equivalence entry's own batch keys (stage.Keyed): the two documents, how
// they are run, and the transfer set.
type Entry struct {
	Original    string `yaml:"original"`
	Candidate   string `yaml:"candidate"`
	Variant     string `yaml:"variant"`
	Round       int    `yaml:"round"`
	MinCases    int    `yaml:"min_cases"`
	RunnerModel string `yaml:"runner_model"`
	Cases       []Case `yaml:"cases"`
	CasesFile   string `yaml:"cases_file"`
	// Baseline is a file of teacher transcripts captured elsewhere, by case id.
	Baseline string `yaml:"baseline"`
}

// Artifact is the candidate document, which a pipeline's annotation of the AC points at
// (batch.Artifacted).
func (e *Entry) Artifact() string { return e.Candidate }

// Defaults are the batch's own equivalence keys: the defaults of its entries'.
type Defaults struct {
	MinCases    int    `yaml:"min_cases"`
	RunnerModel string `yaml:"runner_model"`
}

// Case is one case of an equivalence transfer set.
type Case struct {
	ID    string `yaml:"id" json:"id"`
	Input string `yaml:"input" json:"input"`
	Tag   string `yaml:"tag" json:"tag"`
}

// keysSchema is the JSON Schema of Entry's and Defaults' keys, a fragment of the batch
// schema.
//
//go:embed keys.schema.json
var keysSchema []byte

var _ stage.Keyed = Kind{}

// BatchKeys implements stage.Keyed.
func (Kind) BatchKeys() batch.Keys {
	return batch.Keys{Entry: func() any { return &Entry{} }, Batch: func() any { return &Defaults{} }, Schema: keysSchema}
}

// entryOf is ac's equivalence keys; none for an entry with a problem.
func entryOf(ac batch.AC) *Entry {
	if e, ok := ac.Part.(*Entry); ok && e != nil {
		return e
	}
	return &Entry{}
}

// defaultsOf is b's equivalence keys.
func defaultsOf(b *batch.Batch) *Defaults {
	if d, ok := b.Part(string(events.KindEquivalence)).(*Defaults); ok && d != nil {
		return d
	}
	return &Defaults{}
}
