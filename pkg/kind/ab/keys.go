package ab

import "cmp"

// Entry is an ab entry's own batch key beyond the common ones (ours, reference,
// criterion, judges): the order its pair is judged in. pkg/kind/ab/stages hands it to the
// batch format (stage.Keyed); it is declared here so that ab's commands (calibrate) read
// it too.
type Entry struct {
	Positions string `yaml:"positions"`
}

// Defaults are the batch's own ab keys (stage.Keyed, through pkg/kind/ab/stages): the
// confidence threshold its suggestions are routed with, the order its entries are
// judged in when they set none, and when `positions: auto` swaps.
type Defaults struct {
	Threshold *float64 `yaml:"threshold"`
	Positions string   `yaml:"positions"`
	// AutoSwap sets when positions auto swaps.
	AutoSwap *AutoSwap `yaml:"auto_swap"`
}

// AutoSwap is the batch's `auto_swap`: when `positions: auto` judges the swapped order
// too. A missing value takes the ab kind's default.
type AutoSwap struct {
	Confidence *float64 `yaml:"confidence"`
	FlipRate   *float64 `yaml:"flip_rate"`
}

// PositionsOf is the positions an entry of ab is judged with as the batch writes it: the
// entry's own (e, its batch.AC.Part), else the batch's (d, its Batch.Part), "" when
// neither sets one (single, the default). Either may be nil.
func PositionsOf(e *Entry, d *Defaults) string {
	var own, batch string
	if e != nil {
		own = e.Positions
	}
	if d != nil {
		batch = d.Positions
	}
	return cmp.Or(own, batch)
}
