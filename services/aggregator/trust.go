package aggregator

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	abstages "github.com/tribunal-dev/tribunal/pkg/kind/ab/stages"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// maxFlipConflicts bounds the compare-and-set retries of one flip-history update.
const maxFlipConflicts = 10

// judged reports what a batch this instance completed tells about its judges: each
// model's position bias, flip rate and panel agreement to Prometheus, and the swapped
// pairs to the tenant's flip history that `positions: auto` reads. Neither decides
// anything about the batch, so a failure is logged, never returned: the completion
// stands either way.
func (s *Service) judged(ctx context.Context, tenant, batch string, judgments []trust.Judgment, attempt int) {
	if len(judgments) == 0 {
		return
	}
	f, err := collect.FiguresOf(judgments)
	if err != nil {
		s.log.WarnContext(ctx, "judge figures of a completed batch", "tenant", tenant, "batch", batch, "err", err)
		return
	}
	telemetry.BatchJudged(tenant, f.Judges, f.Alpha, attempt == 0)
	if err := s.recordFlips(ctx, tenant, batch, f.Flips); err != nil {
		s.log.WarnContext(ctx, "flip history not updated", "tenant", tenant, "batch", batch, "err", err)
	}
}

// recordFlips adds the batch's swapped pairs to the tenant's flip history by
// compare-and-set (several aggregators may complete batches of one tenant at once).
func (s *Service) recordFlips(ctx context.Context, tenant, batch string, flips map[string]ab.FlipCount) error {
	if s.cache == nil {
		return nil
	}
	for attempt := 0; ; attempt++ {
		h, rev, err := abstages.LoadFlipHistory(ctx, s.cache, tenant)
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
		err = kv.CompareAndSet(ctx, s.cache, key, data, rev)
		if err == nil {
			return nil
		}
		if !kv.IsConflict(err) && !errors.Is(err, jetstream.ErrKeyExists) || attempt >= maxFlipConflicts {
			return err
		}
	}
}
