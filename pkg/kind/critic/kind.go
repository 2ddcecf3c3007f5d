package critic

import (
	"context"
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stage"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Kind is the `critic` judge kind.
type Kind struct{}

var _ kind.Kind = Kind{}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindCritic }

// ResultOf reads a critic job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "critic result")
}

func setResult(j *records.Job, r Result) error { return kind.Marshal(j, &j.Result, "critic result", r) }

// Plan implements kind.Kind: one job scoring the AC's output (a file, or inline text the
// client stores) against its task.
func (Kind) Plan(ctx context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	spec := events.JobSpec{Kind: events.KindCritic, ACID: ac.ID, Criterion: ac.Criterion}
	cs := &events.CriticSpec{Task: ac.Task}
	var names []string
	switch problem := ac.Problem; {
	case problem != "":
		cs.Output = stage.BlockedSource(ac.OutputFile, problem)
		spec.Problem = problem
	case strings.TrimSpace(ac.Task) == "" || (strings.TrimSpace(ac.Output) == "" && ac.OutputFile == ""):
		cs.Output = stage.BlockedSource(ac.OutputFile, MissingInput)
	case ac.OutputFile != "":
		names = []string{ac.OutputFile}
	default:
		attrs, err := blob.PutBytes(ctx, env.Store, env.Tenant, []byte(ac.Output), "text/plain")
		if err != nil {
			return nil, fmt.Errorf("AC %s: store inline output: %w", ac.ID, err)
		}
		cs.Output = events.Source{Name: "(inline output)", Blob: &events.Blob{SHA256: attrs.Ref.SHA256, MediaType: "text/plain", Size: attrs.Size}}
	}
	return []stage.Plan{{JobID: ac.ID, Names: names, Build: func(up map[string]events.Source) events.JobSpec {
		if len(names) == 1 {
			cs.Output = up[names[0]]
		}
		spec.Critic = cs
		return spec
	}}}, nil
}

// Render implements kind.Kind: the output is ingested like any artifact.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	if strings.TrimSpace(spec.Critic.Task) == "" {
		done.Blocked = MissingInput
		return done, nil
	}
	a, blocked, err := stage.Ingest(ctx, env, ev.Tenant, spec.Critic.Output)
	if err != nil {
		return nil, fmt.Errorf("ingest critic output %q: %w", spec.Critic.Output.Name, err)
	}
	if blocked != "" {
		done.Blocked = blocked
		if blocked != MissingInput {
			done.Blocked = fmt.Sprintf("output %q: %s", spec.Critic.Output.Name, blocked)
		}
		return done, nil
	}
	done.Artifacts = map[string]events.Artifact{"output": a}
	return done, nil
}

// Gate implements kind.Kind: the output must be readable and intact.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	gates, err := stage.ArtifactGates(ctx, env.Store, ev.Tenant, rd.Artifacts, "output")
	if err != nil {
		return nil, err
	}
	if !stage.AllGreen(gates) {
		return &events.GatesFailed{Kind: events.KindCritic, ACID: rd.Spec.ACID, Gates: gates}, nil
	}
	return &events.GatesDone{Kind: events.KindCritic, Criterion: rd.Spec.Critic.Task, Gates: stage.Blind(gates),
		Slots: []events.Slot{{Name: "output", Artifact: rd.Artifacts["output"]}}}, nil
}

// Judge implements kind.Kind: one scoring call, answered from the judge-call cache when
// the task and the output are unchanged.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	out := gd.Slots[0].Artifact.Blob
	data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: out.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	model := env.Model(gd)
	key := env.CacheKey(events.KindCritic, ev.Tenant, model, PromptHash(), gd.Criterion, out.SHA256)
	o, cached, err := stage.CachedCall(ctx, env, ev.Tenant, key, func(p judge.Provider) judgeOutcome {
		return Judge(ctx, p, model, env.Instance, Input{Key: ev.JobID, Task: gd.Criterion, Output: string(data)}, env.Params)
	})
	if err != nil {
		return nil, err
	}
	v := &events.CriticVote{Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw}
	v.Judge.Instance, v.Judge.Cached = env.Instance, cached
	telemetry.JudgeCall(events.KindCritic, v.Judge, v.Status)
	if o.Status == events.VoteOK {
		v.Correctness, v.Slop, v.Scope, v.Rationale = o.Answer.Correctness, o.Answer.Slop, o.Answer.Scope, o.Answer.Rationale
		v.ClaimedVerdict, v.ClaimedQuality = o.Answer.Verdict, o.Answer.Quality
	}
	return &events.VerdictEmitted{Kind: events.KindCritic, Critic: v}, nil
}

// Decide implements kind.Kind: quality and verdict are re-derived from the judge's three
// scores, whatever the judge claimed, and the claims that disagree are counted.
func (Kind) Decide(st *kind.Step) error {
	ve, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok || ve.Critic == nil {
		return fmt.Errorf("%w: a critic job takes critic verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	j, v := st.Job, *ve.Critic
	name := kind.JudgeName(v.Judge)
	j.Judges = []string{name}
	j.Decided = &events.IterationDecided{Kind: events.KindCritic, ACID: j.ACID, Final: true, Judges: []string{name}}
	switch v.Status {
	case events.VoteUnavailable:
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", fmt.Sprintf("judge unavailable (%s): %s", name, v.Error)
		return setResult(j, Blocked(j.BlockReason))
	case events.VoteBlocked:
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", v.Error
		return setResult(j, Blocked(v.Error))
	case events.VoteOK:
		r, err := Check(Answer{Correctness: v.Correctness, Slop: v.Slop, Scope: v.Scope, Rationale: v.Rationale,
			Verdict: v.ClaimedVerdict, Quality: v.ClaimedQuality})
		if err == nil {
			j.Status = events.StatusCompared
			j.Decided.Status, j.Decided.Disagreements = events.StatusCompared, r.Disagreements
			j.Decided.Critic = &events.CriticResult{Correctness: r.Correctness, Slop: r.Slop, Scope: r.Scope, Quality: r.Quality,
				Verdict: r.Verdict, Rationale: r.Rationale, Disagreements: r.Disagreements}
			return setResult(j, r)
		}
		v.Error = err.Error()
	}
	j.Status = events.StatusSchemaViolation
	j.Decided.Status = events.StatusSchemaViolation
	return setResult(j, SchemaViolation(fmt.Sprintf("%s (%s)", v.Error, name)))
}

// Blocked implements kind.Kind.
func (Kind) Blocked(j *records.Job) { _ = setResult(j, Blocked(j.BlockReason)) }

// Outcome implements kind.Kind: only a pass is clean.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	if r, err := ResultOf(j); err == nil && r != nil && r.Verdict == VerdictPass {
		return kind.OutcomeClean
	}
	return kind.OutcomeFinding
}

// Manifest implements kind.Kind: one result per AC, in batch order.
func (Kind) Manifest(_, batch string) kind.Manifest {
	return kind.NewListFold(events.KindCritic, batch, func(j *records.Job) ManifestRow {
		r, _ := ResultOf(j)
		return ManifestRow{ManifestEntry: kind.EntryOf(j), Critic: r}
	})
}

// Manifest is the critic kind's manifest: one result per AC, in batch order.
type Manifest = kind.ListManifest[ManifestRow]

// ManifestRow is one AC of the critic manifest.
type ManifestRow struct {
	kind.ManifestEntry
	Critic *Result `json:"critic,omitempty"`
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	c, _ := ResultOf(j)
	if c == nil {
		return row
	}
	if c.Verdict != "" {
		q := c.Quality
		row.Verdict, row.Quality = c.Verdict, &q
		row.Detail = fmt.Sprintf("correctness %d, slop %d, scope %d: %s", c.Correctness, c.Slop, c.Scope, c.Rationale)
	} else if row.Reason == "" {
		row.Reason = c.Reason
	}
	return row
}

// judgeOutcome is one critic call as the judge-call cache keeps it.
type judgeOutcome = judge.Outcome[Answer]

// Estimate implements kind.Kind: one scoring call.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	if spec.Critic == nil {
		return kind.Estimate{}
	}
	return kind.Estimate{Sources: []kind.Source{{Role: "output", Src: spec.Critic.Output}}, JudgeCalls: 1, MaxJudgeCalls: 1}
}
