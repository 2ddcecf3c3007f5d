package client

import (
	"context"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// HeldBy lists the jobs whose next steps wait for job's spot-check (the HE-2 hold, see
// pkg/rulebook's Park), in the order they began to wait; none once job has its outcome.
func HeldBy(ctx context.Context, b bus.Buckets, tenant, batchID, job string) ([]string, error) {
	rec, _, err := records.New(b).Job(ctx, tenant, batchID, job)
	if err != nil {
		return nil, err
	}
	if rec.Final() {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, h := range rec.Held {
		if !seen[h.Job] {
			seen[h.Job] = true
			out = append(out, h.Job)
		}
	}
	return out, nil
}
