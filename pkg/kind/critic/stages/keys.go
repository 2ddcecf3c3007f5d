package stages

import (
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Entry is a critic entry's own batch keys (stage.Keyed): the task and the output to score.
type Entry struct {
	Task       string `yaml:"task"`
	Output     string `yaml:"output"`
	OutputFile string `yaml:"output_file"`
}

// Artifact is the output file, which a pipeline's annotation of the AC points at
// (batch.Artifacted).
func (e *Entry) Artifact() string { return e.OutputFile }

// keysSchema is the JSON Schema of Entry's keys, a fragment of the batch schema.
//
//go:embed keys.schema.json
var keysSchema []byte

var _ stage.Keyed = Kind{}

// BatchKeys implements stage.Keyed.
func (Kind) BatchKeys() batch.Keys {
	return batch.Keys{Entry: func() any { return &Entry{} }, Schema: keysSchema}
}

// entryOf is ac's critic keys; none for an entry with a problem.
func entryOf(ac batch.AC) *Entry {
	if e, ok := ac.Part.(*Entry); ok && e != nil {
		return e
	}
	return &Entry{}
}
