package stages

import (
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Entry is a checklist entry's own batch keys (stage.Keyed): the output to check, inline
// or as a file. The items are the entry's criterion, a key every entry has.
type Entry struct {
	Output     string `yaml:"output"`
	OutputFile string `yaml:"output_file"`
}

// Artifact is the output file (batch.Artifacted).
func (e *Entry) Artifact() string { return e.OutputFile }

// keysSchema is the JSON Schema of Entry's keys, the kind's fragment of the batch schema.
const keysSchema = `{
  "entry": {
    "output": {"type": "string", "description": "checklist: the output to check, inline."},
    "output_file": {"type": "string", "description": "checklist: the output to check, as a file (path or URL)."}
  }
}`

var _ stage.Keyed = Kind{}

// BatchKeys implements stage.Keyed.
func (Kind) BatchKeys() batch.Keys {
	return batch.Keys{Entry: func() any { return &Entry{} }, Schema: []byte(keysSchema)}
}

// entryOf is ac's checklist keys; none for an entry with a problem.
func entryOf(ac batch.AC) *Entry {
	if e, ok := ac.Part.(*Entry); ok && e != nil {
		return e
	}
	return &Entry{}
}
