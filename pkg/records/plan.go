package records

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bounds"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// PlanPage is one page of a batch's plan as the submitting client stores it in blob
// storage: the jobs of indexes First, First+1, ... in order. The aggregator reads a page
// when a cancel reaches it, so the jobs a killed submission never published can still be
// blocked by id and counted.
type PlanPage struct {
	First int          `json:"first"`
	Jobs  []PlannedJob `json:"jobs"`
}

// PlannedJob is one job of a plan: what recording it blocked needs when it was never
// submitted.
type PlannedJob struct {
	ID        string      `json:"id"`
	Kind      events.Kind `json:"kind"`
	Iteration int         `json:"iteration,omitempty"`
}

// EncodePlanPage is a page's stored form.
func EncodePlanPage(p PlanPage) ([]byte, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode plan page at %d: %w", p.First, err)
	}
	return data, nil
}

// planPageLimits bound a stored page before it is decoded: a team stores its plan pages
// itself (through the ingress), and a page lists at most events.PlanPageSize jobs of three
// fields each.
var planPageLimits = bounds.Limits{Depth: 3, Items: events.PlanPageSize, Total: 4 * (events.PlanPageSize + 1)}

// DecodePlanPage reads a stored page and checks every job in it.
func DecodePlanPage(data []byte) (*PlanPage, error) {
	if err := bounds.JSON(data, planPageLimits); err != nil {
		return nil, fmt.Errorf("plan page: %w: %v", ErrCorrupt, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p PlanPage
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("plan page: %w: %v", ErrCorrupt, err)
	}
	for i, j := range p.Jobs {
		switch {
		case events.ValidateName(j.ID) != nil:
			return nil, fmt.Errorf("plan page at %d: jobs[%d].id: %w: %v", p.First, i, ErrCorrupt, events.ValidateName(j.ID))
		case j.Kind == "":
			return nil, fmt.Errorf("plan page at %d: jobs[%d].kind: %w: missing", p.First, i, ErrCorrupt)
		case j.Iteration < 0:
			return nil, fmt.Errorf("plan page at %d: jobs[%d].iteration: %w: negative", p.First, i, ErrCorrupt)
		}
	}
	return &p, nil
}

// Check reports whether p is page number page of a batch of size jobs: where it starts
// and how many jobs it lists.
func (p *PlanPage) Check(page, size int) error {
	first := page * events.PlanPageSize
	want := min(events.PlanPageSize, size-first)
	if p.First != first || len(p.Jobs) != want {
		return fmt.Errorf("plan page %d of a batch of %d: %w: starts at %d with %d jobs, want %d with %d", page, size, ErrCorrupt, p.First, len(p.Jobs), first, want)
	}
	return nil
}

// LoadPlanPage reads one page of a batch's plan from blob storage (verified against its
// content address on the way).
func LoadPlanPage(ctx context.Context, store blob.Store, tenant string, ref events.Blob) (*PlanPage, error) {
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: ref.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read plan page %s: %w", ref.SHA256, err)
	}
	return DecodePlanPage(data)
}
