package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	art "github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// Plan is what submitting a batch would do, AC by AC, found without running anything:
// the jobs Submit would publish, each artifact classified as the renderer would, and what
// the batch would cost in model calls.
type Plan struct {
	Batch string      `json:"batch"`
	ACs   []PlannedAC `json:"acs"`
	// Jobs counts the jobs (a rubric AC is one per view).
	Jobs int `json:"jobs"`
	// JudgeCalls and RunnerCalls are the model calls the batch would make, before cache
	// hits, repair re-asks and retries; MaxJudgeCalls adds what rubric loops may spend up to
	// their budgets.
	JudgeCalls    int `json:"judge_calls"`
	MaxJudgeCalls int `json:"max_judge_calls"`
	RunnerCalls   int `json:"runner_calls"`
	// PromptTokens and CompletionTokens estimate what those calls send and receive
	// (estimate.go: rough, not a bound); Cost prices them when Price was asked to, at the
	// table named PriceTable.
	PromptTokens     int64      `json:"prompt_tokens"`
	CompletionTokens int64      `json:"completion_tokens"`
	Cost             *price.Sum `json:"cost,omitempty"`
	// MaxPromptTokens, MaxCompletionTokens and MaxCost are the worst case: every AC at
	// its MaxJudgeCalls, a judge ladder's every rung asked at its own model's price (Cost
	// is its first rung only). A rung without a price leaves MaxCost unpriced calls.
	MaxPromptTokens     int64      `json:"max_prompt_tokens,omitempty"`
	MaxCompletionTokens int64      `json:"max_completion_tokens,omitempty"`
	MaxCost             *price.Sum `json:"max_cost,omitempty"`
	PriceTable          string     `json:"price_table,omitempty"`
	// BatchAPI says Cost prices the judge calls at the provider's batch discount: they
	// would go through its batch API (judge_mode: batch). Runner calls never do.
	BatchAPI bool `json:"batch_api,omitempty"`
	// Problems is everything that would not be judged: entries skipped, and each AC that
	// would be blocked, with why.
	Problems []string `json:"problems"`
}

// PlannedAC is one AC of a plan.
type PlannedAC struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Line is where the AC's entry starts in the batch file.
	Line int `json:"line"`
	// Jobs is 1, or the number of views of a rubric feature.
	Jobs      int               `json:"jobs"`
	Artifacts []PlannedArtifact `json:"artifacts,omitempty"`
	// Judges are an ab panel's models; empty means the judge service's model. With a
	// ladder, Judges is its first rung and Ladder every rung.
	Judges    []string `json:"judges,omitempty"`
	Ladder    []string `json:"ladder,omitempty"`
	Positions string   `json:"positions,omitempty"`
	// Cases is an equivalence AC's transfer set size.
	Cases         int `json:"cases,omitempty"`
	JudgeCalls    int `json:"judge_calls"`
	MaxJudgeCalls int `json:"max_judge_calls"`
	RunnerCalls   int `json:"runner_calls,omitempty"`
	// RunnerModel is the model the runner calls are priced at; empty means the judge
	// service's model.
	RunnerModel string `json:"runner_model,omitempty"`
	// PromptTokens, CompletionTokens and Cost are the AC's share of the plan's estimate.
	PromptTokens     int64      `json:"prompt_tokens,omitempty"`
	CompletionTokens int64      `json:"completion_tokens,omitempty"`
	Cost             *price.Sum `json:"cost,omitempty"`
	// MaxPromptTokens, MaxCompletionTokens and MaxCost are the AC's share of the plan's
	// worst case.
	MaxPromptTokens     int64      `json:"max_prompt_tokens,omitempty"`
	MaxCompletionTokens int64      `json:"max_completion_tokens,omitempty"`
	MaxCost             *price.Sum `json:"max_cost,omitempty"`
	// perCall is the prompt tokens of one of the AC's calls (estimateTokens).
	perCall int64
	// Blocked is why the AC would not be judged.
	Blocked string `json:"blocked,omitempty"`
}

// PlannedArtifact is one input of an AC, as the renderer would take it in.
type PlannedArtifact struct {
	// Role is the artifact's part: ours, reference, output, original, candidate.
	Role string `json:"role"`
	Name string `json:"name"`
	// Class is how a judge takes it in (image, text, html); "remote" for a URL, which the
	// renderer fetches and classifies when the batch runs.
	Class     string `json:"class,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Blocked   string `json:"blocked,omitempty"`
}

// PlanBatch prepares b as Submit would, uploading its artifacts into store (a throwaway
// store: nothing is published), and classifies every artifact with the renderer's rules
// (package artifact).
func (s *Submitter) PlanBatch(ctx context.Context, b *batch.Batch, tenant string) (*Plan, error) {
	prep, err := s.Prepare(ctx, b, tenant)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Batch: b.Path, Jobs: prep.Len()}
	plan.Problems = append(plan.Problems, prep.Rejected...)
	byAC := map[string]*PlannedAC{}
	var arts *artifacts
	err = prep.each(ctx, func(w *window, _ *planned, _ int, j Job) error {
		if w.arts != arts {
			// The artifacts are classified as the renderer reads them: from the store.
			arts = w.arts
			if err := s.upload(ctx, tenant, arts, arts.names()); err != nil {
				return err
			}
		}
		k, err := registry.Lookup(j.Spec.Kind)
		if err != nil {
			return err
		}
		est := k.Estimate(j.Spec)
		pa := byAC[j.AC.ID]
		if pa == nil {
			plan.ACs = append(plan.ACs, PlannedAC{ID: j.AC.ID, Kind: string(j.Spec.Kind), Line: j.AC.Line,
				Judges: est.Judges, Ladder: est.Ladder, Positions: est.Positions, Cases: est.Cases, RunnerModel: est.RunnerModel})
			pa = &plan.ACs[len(plan.ACs)-1]
			byAC[j.AC.ID] = pa
			if err := s.planArtifacts(ctx, tenant, j, est, pa); err != nil {
				return err
			}
		}
		pa.Jobs++
		pa.JudgeCalls += est.JudgeCalls
		pa.MaxJudgeCalls += est.MaxJudgeCalls
		pa.RunnerCalls += est.RunnerCalls
		if pa.Blocked == "" {
			pa.Blocked = cmp.Or(j.Spec.Problem, est.Blocked)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range plan.ACs {
		pa := &plan.ACs[i]
		if pa.Blocked != "" {
			pa.JudgeCalls, pa.MaxJudgeCalls, pa.RunnerCalls = 0, 0, 0
			plan.Problems = append(plan.Problems, pa.ID+": "+strings.TrimPrefix(pa.Blocked, pa.ID+": "))
		}
		pa.MaxJudgeCalls = max(pa.MaxJudgeCalls, pa.JudgeCalls)
		plan.JudgeCalls += pa.JudgeCalls
		plan.MaxJudgeCalls += pa.MaxJudgeCalls
		plan.RunnerCalls += pa.RunnerCalls
	}
	plan.estimateTokens()
	return plan, nil
}

// planArtifacts classifies the artifacts of an AC's first job as the renderer would
// ingest them.
func (s *Submitter) planArtifacts(ctx context.Context, tenant string, j Job, est kind.Estimate, pa *PlannedAC) error {
	if j.Spec.Problem != "" {
		// The entry itself is at fault; its artifacts were not resolved.
		pa.Blocked = j.Spec.Problem
		return nil
	}
	var reasons []string
	for _, src := range est.Sources {
		a, err := s.classify(ctx, tenant, src.Role, src.Src, src.Document)
		if err != nil {
			return fmt.Errorf("AC %s: %w", j.AC.ID, err)
		}
		pa.Artifacts = append(pa.Artifacts, a)
		if a.Blocked != "" {
			reasons = append(reasons, fmt.Sprintf("%s artifact %q: %s", src.Role, a.Name, a.Blocked))
		}
	}
	pa.Blocked = strings.Join(reasons, "; ")
	return nil
}

// classify takes in one artifact as the renderer does: a source's own error blocks it,
// an uploaded file is read back and classified by package artifact (an equivalence
// document only needs to be text), and a URL is left to the renderer.
func (s *Submitter) classify(ctx context.Context, tenant, role string, src events.Source, document bool) (PlannedArtifact, error) {
	a := PlannedArtifact{Role: role, Name: src.Name}
	switch {
	case src.Error != "":
		a.Blocked = src.Error
	case src.URL != "":
		a.Class = "remote"
	case src.Blob != nil:
		data, attrs, err := blob.ReadAll(ctx, s.Store, blob.Ref{Tenant: tenant, SHA256: src.Blob.SHA256})
		if errors.Is(err, blob.ErrNotFound) {
			a.Blocked = art.ReasonNotStored
			break
		}
		if err != nil {
			return a, fmt.Errorf("read %s back: %w", src.Name, err)
		}
		a.Size = attrs.Size
		r := art.Classify(src.Name, data, attrs.MediaType)
		a.Class, a.MediaType, a.Blocked = r.Class, r.MediaType, r.Blocked
		if document {
			// The equivalence runner reads any UTF-8 text and applies none of the
			// static sensor's other rules.
			a.Blocked = ""
			if !utf8.Valid(data) {
				a.Blocked = art.CauseUnsupported + ": a document must be text"
			}
		}
	default:
		a.Blocked = art.CauseMissing
	}
	return a, nil
}
