package stages

import (
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// keysSchema is the JSON Schema of ab's keys (ab.Entry's and ab.Defaults'), a fragment
// of the batch schema.
//
//go:embed keys.schema.json
var keysSchema []byte

var _ stage.Keyed = Kind{}

// BatchKeys implements stage.Keyed: an entry's positions (ab.Entry), and the batch's
// threshold, positions and auto_swap (ab.Defaults).
func (Kind) BatchKeys() batch.Keys {
	return batch.Keys{
		Entry:  func() any { return &ab.Entry{} },
		Batch:  func() any { return &ab.Defaults{} },
		Schema: keysSchema,
	}
}

// entryOf is ac's ab keys; none for an entry with a problem.
func entryOf(ac batch.AC) *ab.Entry {
	if e, ok := ac.Part.(*ab.Entry); ok && e != nil {
		return e
	}
	return &ab.Entry{}
}

// defaultsOf is b's ab keys.
func defaultsOf(b *batch.Batch) *ab.Defaults {
	if d, ok := b.Part(string(events.KindAB)).(*ab.Defaults); ok && d != nil {
		return d
	}
	return &ab.Defaults{}
}
