package client

import (
	"context"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// FindJob returns one job record of a batch.
func FindJob(ctx context.Context, b bus.Buckets, tenant, batchID, job string) (*records.Job, error) {
	return records.FindJob(ctx, b, tenant, batchID, job)
}
