package stages

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

var _ stage.Learning = Kind{}

// maxFlipConflicts bounds the compare-and-set retries of one flip-history update.
const maxFlipConflicts = 10

// Learn implements stage.Learning: it adds a completed batch's swapped pairs to the
// tenant's flip history by compare-and-set (several aggregators may complete batches of
// one tenant at once).
func (Kind) Learn(ctx context.Context, cache kv.KV, tenant, batch string, f collect.Figures) error {
	flips := make(map[string]ab.FlipCount, len(f.Flips))
	for judge, c := range f.Flips {
		flips[judge] = ab.FlipCount{Pairs: c.Pairs, Flips: c.Flips}
	}
	for attempt := 0; ; attempt++ {
		h, rev, err := LoadFlipHistory(ctx, cache, tenant)
		if err != nil && rev == 0 {
			return err
		}
		// A history that no longer decodes is replaced rather than left to block every
		// later update.
		if !h.Record(batch, flips) && err == nil {
			return nil
		}
		data, merr := json.Marshal(h)
		if merr != nil {
			return merr
		}
		key := ab.FlipHistoryKey(tenant)
		err = kv.CompareAndSet(ctx, cache, key, data, rev)
		if err == nil {
			return nil
		}
		if !kv.IsConflict(err) && !errors.Is(err, jetstream.ErrKeyExists) || attempt >= maxFlipConflicts {
			return err
		}
	}
}
