// Package stages is the critic kind's stages: planning a job from its entry (storing an
// inline output), ingesting the output, the artifact gate and the one scoring call. The
// kind's rules (pkg/kind/critic) derive the outcome from the judge's scores.
package stages

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Kind is the critic kind with its stages.
type Kind struct{ critic.Kind }

var _ stage.Kind = Kind{}

// Plan implements stage.Stages: one job scoring the AC's output (a file, or inline text the
// client stores) against its task.
func (Kind) Plan(ctx context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	spec := events.JobSpec{Kind: events.KindCritic, ACID: ac.ID, Criterion: ac.Criterion}
	e := entryOf(ac)
	cs := &critic.Spec{Task: e.Task}
	var names []string
	switch problem := ac.Problem(); {
	case problem != "":
		cs.Output = stage.BlockedSource(e.OutputFile, problem)
		spec.Problem = problem
	case strings.TrimSpace(e.Task) == "" || (strings.TrimSpace(e.Output) == "" && e.OutputFile == ""):
		cs.Output = stage.BlockedSource(e.OutputFile, critic.MissingInput)
	case e.OutputFile != "":
		names = []string{e.OutputFile}
	default:
		attrs, err := blob.PutBytes(ctx, env.Store, env.Tenant, []byte(e.Output), "text/plain")
		if err != nil {
			return nil, fmt.Errorf("AC %s: store inline output: %w", ac.ID, err)
		}
		cs.Output = events.Source{Name: "(inline output)", Blob: &events.Blob{SHA256: attrs.Ref.SHA256, MediaType: "text/plain", Size: attrs.Size}}
	}
	return []stage.Plan{{JobID: ac.ID, Names: names, Build: func(up map[string]events.Source) events.JobSpec {
		if len(names) == 1 {
			cs.Output = up[names[0]]
		}
		spec.KindPart = cs
		return spec
	}}}, nil
}

// Render implements stage.Stages: the output is ingested like any artifact.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	if strings.TrimSpace(critic.SpecOf(spec.KindPart).Task) == "" {
		done.Blocked = critic.MissingInput
		return done, nil
	}
	a, blocked, err := stage.Ingest(ctx, env, ev.Tenant, critic.SpecOf(spec.KindPart).Output)
	if err != nil {
		return nil, fmt.Errorf("ingest critic output %q: %w", critic.SpecOf(spec.KindPart).Output.Name, err)
	}
	if blocked != "" {
		done.Blocked = blocked
		if blocked != critic.MissingInput {
			done.Blocked = fmt.Sprintf("output %q: %s", critic.SpecOf(spec.KindPart).Output.Name, blocked)
		}
		return done, nil
	}
	done.Artifacts = map[string]events.Artifact{"output": a}
	return done, nil
}

// Gate implements stage.Stages: the output must be readable and intact.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	gates, err := stage.ArtifactGates(ctx, env.Store, ev.Tenant, rd.Artifacts, "output")
	if err != nil {
		return nil, err
	}
	if !stage.AllGreen(gates) {
		return &events.GatesFailed{Kind: events.KindCritic, ACID: rd.Spec.ACID, Gates: gates}, nil
	}
	return &events.GatesDone{Kind: events.KindCritic, Criterion: critic.SpecOf(rd.Spec.KindPart).Task, Gates: stage.Blind(gates),
		Slots: []events.Slot{{Name: "output", Artifact: rd.Artifacts["output"]}}}, nil
}

// Judge implements stage.Stages: one scoring call, answered from the judge-call cache when
// the task and the output are unchanged.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	out := gd.Slots[0].Artifact.Blob
	data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: out.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	model := env.Model(gd)
	ve := &events.VerdictEmitted{Kind: events.KindCritic}
	// Each trial is its own question: its own cache entry and seed (stage.TrialParams),
	// so trial 2 is not trial 1's cache hit.
	for t := range gd.Repeats.K() {
		parts := []string{gd.Criterion, out.SHA256}
		if t > 0 {
			parts = append(parts, "trial", strconv.Itoa(t))
		}
		params := stage.TrialParams(env.Params, t)
		key := env.CacheKey(events.KindCritic, ev.Tenant, model, critic.PromptHash(), parts...)
		o, cached, err := stage.CachedCall(ctx, env, ev.Tenant, key, func(p judge.Provider) judge.Outcome[critic.Answer] {
			return critic.Judge(ctx, p, model, env.Instance, critic.Input{Key: ev.JobID, Task: gd.Criterion, Output: string(data)}, params)
		})
		if err != nil {
			return nil, err
		}
		v := critic.Vote{Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw}
		v.Judge.Instance, v.Judge.Cached = env.Instance, cached
		telemetry.JudgeCall(events.KindCritic, v.Judge, v.Status)
		if o.Status == events.VoteOK {
			v.Correctness, v.Slop, v.Scope, v.Rationale = o.Answer.Correctness, o.Answer.Slop, o.Answer.Scope, o.Answer.Rationale
			v.ClaimedVerdict, v.ClaimedQuality = o.Answer.Verdict, o.Answer.Quality
		}
		if t == 0 {
			ve.KindPart = &v
		} else {
			ve.KindTrials = append(critic.TrialsOf(ve.KindTrials), v)
		}
	}
	return ve, nil
}
