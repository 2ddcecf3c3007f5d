package stages

import (
	"context"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// LoadRubric reads the rubric a view is judged with (the one its job carries): a
// spot-check is checked against its dimensions (argus.Rubric.CheckSpotcheck).
func LoadRubric(ctx context.Context, store blob.Store, tenant string, spec events.JobSpec) (*argus.Rubric, error) {
	if rubricwire.SpecOf(spec.KindPart) == nil || rubricwire.SpecOf(spec.KindPart).Blocked != "" {
		return nil, nil
	}
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: rubricwire.SpecOf(spec.KindPart).Rubric.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read rubric: %w", err)
	}
	return argus.ParseRubric(data)
}
