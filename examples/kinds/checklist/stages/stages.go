// Package stages is the example checklist kind's stages: planning a job from its entry
// (the criterion's lines are the items, the output a file or inline text), ingesting the
// output, the artifact gate, and the one judge call. The rules are in the folder above.
package stages

import (
	"context"
	"fmt"
	"slices"

	"github.com/tribunal-dev/tribunal/examples/kinds/checklist"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Kind is the checklist kind with its stages: what the registry holds (kinds.Add).
type Kind struct{ checklist.Kind }

var _ stage.Kind = Kind{}

// Plan implements stage.Stages: one job checking the AC's output (output_file, or
// output as inline text the client stores) against the lines of its criterion.
func (Kind) Plan(ctx context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	spec := events.JobSpec{Kind: checklist.Name, ACID: ac.ID, Criterion: ac.Criterion}
	part := checklist.Spec{Items: checklist.Items(ac.Criterion)}
	e := entryOf(ac)
	var names []string
	switch {
	case ac.Problem() != "":
		part.Output, spec.Problem = stage.BlockedSource(e.OutputFile, ac.Problem()), ac.Problem()
	case len(part.Items) == 0 || e.Output == "" && e.OutputFile == "":
		part.Output = stage.BlockedSource(e.OutputFile, "missing input: a checklist needs a criterion (one item a line) and an output")
		if len(part.Items) == 0 {
			part.Items = []string{"(none)"}
		}
	case e.OutputFile != "":
		names = []string{e.OutputFile}
	default:
		a, err := blob.PutBytes(ctx, env.Store, env.Tenant, []byte(e.Output), "text/plain")
		if err != nil {
			return nil, fmt.Errorf("AC %s: store inline output: %w", ac.ID, err)
		}
		part.Output = events.Source{Name: "(inline output)", Blob: &events.Blob{SHA256: a.Ref.SHA256, MediaType: "text/plain", Size: a.Size}}
	}
	return []stage.Plan{{JobID: ac.ID, Names: names, Build: func(up map[string]events.Source) events.JobSpec {
		if len(names) == 1 {
			part.Output = up[names[0]]
		}
		spec.Part, _ = events.EncodePart(part)
		return spec
	}}}, nil
}

// Render implements stage.Stages: the output is ingested like any artifact.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	part, err := checklist.SpecOf(spec)
	if err != nil {
		return nil, err
	}
	a, blocked, err := stage.Ingest(ctx, env, ev.Tenant, part.Output)
	if err != nil {
		return nil, fmt.Errorf("ingest checklist output %q: %w", part.Output.Name, err)
	}
	if blocked != "" {
		done.Blocked = fmt.Sprintf("output %q: %s", part.Output.Name, blocked)
		return done, nil
	}
	done.Artifacts = map[string]events.Artifact{"output": a}
	return done, nil
}

// Gate implements stage.Stages: the output must be readable and intact; the judge gets
// it in one slot, with the items and nothing else.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	gates, err := stage.ArtifactGates(ctx, env.Store, ev.Tenant, rd.Artifacts, "output")
	if err != nil {
		return nil, err
	}
	if !stage.AllGreen(gates) {
		return &events.GatesFailed{Kind: checklist.Name, ACID: rd.Spec.ACID, Gates: gates}, nil
	}
	part, err := checklist.SpecOf(rd.Spec)
	if err != nil {
		return nil, err
	}
	judging, err := events.EncodePart(checklist.Judging{Items: part.Items})
	if err != nil {
		return nil, err
	}
	return &events.GatesDone{Kind: checklist.Name, Gates: stage.Blind(gates), Part: judging,
		Slots: []events.Slot{{Name: "output", Artifact: rd.Artifacts["output"]}}}, nil
}

// Judge implements stage.Stages: one call, answered from the judge-call cache when the
// items and the output are unchanged.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	var j checklist.Judging
	if err := events.DecodePart(gd.Part, &j); err != nil {
		return nil, err
	}
	out := gd.Slots[0].Artifact.Blob
	data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: out.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	model := env.Model(gd)
	key := env.CacheKey(checklist.Name, ev.Tenant, model, checklist.PromptHash(), append(slices.Clone(j.Items), out.SHA256)...)
	o, cached, err := stage.CachedCall(ctx, env, ev.Tenant, key, func(p judge.Provider) judge.Outcome[checklist.Answer] {
		return checklist.Judge(ctx, p, model, env.Instance, checklist.Input{Key: ev.JobID, Items: j.Items, Output: string(data)}, env.Params)
	})
	if err != nil {
		return nil, err
	}
	v := checklist.Vote{Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw}
	v.Judge.Instance, v.Judge.Cached = env.Instance, cached
	if o.Status == events.VoteOK {
		v.Unmet, v.Note = o.Answer.Unmet, o.Answer.Note
	}
	part, err := events.EncodePart(v)
	if err != nil {
		return nil, err
	}
	return &events.VerdictEmitted{Kind: checklist.Name, Part: part}, nil
}
