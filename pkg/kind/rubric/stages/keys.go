package stages

import (
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Entry is a rubric entry's own batch keys (stage.Keyed): the feature's spec and how its
// loop runs.
type Entry struct {
	Spec          string `yaml:"spec"`
	Mode          string `yaml:"mode"`
	MaxIterations int    `yaml:"max_iterations"`
	// ArgusRuns asks for the seed's files in the feature's .argus-runs/ folder too; nil
	// takes the batch's.
	ArgusRuns *bool `yaml:"argus_runs"`
}

// Artifact is the feature's spec, which a pipeline's annotation of the AC points at
// (batch.Artifacted).
func (e *Entry) Artifact() string { return e.Spec }

// RunMode is the entry's mode, which `tribunal run` reads to know whether a person will be
// asked on its terminal (batch.Moded).
func (e *Entry) RunMode() string { return e.Mode }

// Defaults are the batch's own rubric keys: the defaults of its entries'.
type Defaults struct {
	// ArgusRuns is the default of Entry.ArgusRuns.
	ArgusRuns bool `yaml:"argus_runs"`
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

// entryOf is ac's rubric keys; none for an entry with a problem.
func entryOf(ac batch.AC) *Entry {
	if e, ok := ac.Part.(*Entry); ok && e != nil {
		return e
	}
	return &Entry{}
}

// argusRunsOf reports whether a rubric AC keeps the seed's files in its feature's
// .argus-runs/ folder: its own argus_runs, else the batch's.
func argusRunsOf(b *batch.Batch, ac batch.AC) bool {
	if e := entryOf(ac); e.ArgusRuns != nil {
		return *e.ArgusRuns
	}
	if d, ok := b.Part(string(events.KindRubric)).(*Defaults); ok && d != nil {
		return d.ArgusRuns
	}
	return false
}
