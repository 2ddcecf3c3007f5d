package stages

import (
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Defaults are the batch's own ab keys (stage.Keyed): the confidence threshold its
// suggestions are routed with and when `positions: auto` swaps. An ab entry has no keys
// beyond the common ones (ours, reference, criterion, positions, judges).
type Defaults struct {
	Threshold *float64 `yaml:"threshold"`
	// AutoSwap sets when positions auto swaps.
	AutoSwap *AutoSwap `yaml:"auto_swap"`
}

// AutoSwap is the batch's `auto_swap`: when `positions: auto` judges the swapped order
// too. A missing value takes the ab kind's default.
type AutoSwap struct {
	Confidence *float64 `yaml:"confidence"`
	FlipRate   *float64 `yaml:"flip_rate"`
}

// keysSchema is the JSON Schema of Defaults' keys, a fragment of the batch schema.
//
//go:embed keys.schema.json
var keysSchema []byte

var _ stage.Keyed = Kind{}

// BatchKeys implements stage.Keyed.
func (Kind) BatchKeys() batch.Keys {
	return batch.Keys{Batch: func() any { return &Defaults{} }, Schema: keysSchema}
}

// defaultsOf is b's ab keys.
func defaultsOf(b *batch.Batch) *Defaults {
	if d, ok := b.Part(string(events.KindAB)).(*Defaults); ok && d != nil {
		return d
	}
	return &Defaults{}
}
