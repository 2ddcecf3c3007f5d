package aggregator

import (
	"context"

	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// judged reports what a batch this instance completed tells about its judges, from the
// figures its completion folded job by job: each model's position bias, flip rate and
// panel agreement to Prometheus, and the figures to every kind that keeps them for its
// later jobs (stage.Learning: ab's flip history, which `positions: auto` reads). Neither
// decides anything about the batch, so a failure is logged, never returned: the
// completion stands either way.
func (s *Service) judged(ctx context.Context, tenant, batch string, figures *collect.FiguresFold, attempt int) {
	if figures.Calls() == 0 {
		return
	}
	f, err := figures.Figures()
	if err != nil {
		s.log.WarnContext(ctx, "judge figures of a completed batch", "tenant", tenant, "batch", batch, "err", err)
		return
	}
	telemetry.BatchJudged(tenant, f.Judges, f.Alpha, attempt == 0)
	if s.cache == nil {
		return
	}
	for _, k := range registry.All() {
		if l, ok := k.(stage.Learning); ok {
			if err := l.Learn(ctx, s.cache, tenant, batch, f); err != nil {
				s.log.WarnContext(ctx, "judge history not updated", "kind", k.Name(), "tenant", tenant, "batch", batch, "err", err)
			}
		}
	}
}
