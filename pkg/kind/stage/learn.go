package stage

import (
	"context"

	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// Learning is a kind that keeps what a completed batch told about its judges, for its
// later jobs to read (ab's flip history, which `positions: auto` reads): the aggregator
// that completes a batch with pairwise judgments hands every such kind the batch's
// figures and the judge-call cache bucket. What it keeps decides nothing about the batch,
// so an error is logged, never the batch's: the completion stands either way.
type Learning interface {
	Learn(ctx context.Context, cache kv.KV, tenant, batch string, f collect.Figures) error
}
