package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Judge implements stage.Stages: one vision call scoring the render against its rubric,
// tokens, spec and reference, and the previous render for the pairwise rank.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	rj := rubricwire.JudgingOf(gd.KindPart)
	if rj == nil {
		return nil, fmt.Errorf("%w: rubric gates.done without view context", kind.ErrNotForKind)
	}
	raw := map[string][]byte{}
	var digests []string
	for _, sl := range gd.Slots {
		data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: sl.Artifact.Blob.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", sl.Name, err)
		}
		raw[sl.Name] = data
		digests = append(digests, sl.Name+"="+sl.Artifact.Blob.SHA256)
	}
	parsed, err := argus.ParseRubric(raw["rubric"])
	if err != nil {
		return nil, fmt.Errorf("rubric: %w", err)
	}
	in := rubric.Input{
		Key: ev.JobID, Feature: rj.Feature, Target: rj.Target, State: rj.State, Appearance: rj.Appearance,
		ReferenceSource: rj.ReferenceSource, Iteration: rj.LoopIteration, Rubric: parsed, RubricJSON: string(raw["rubric"]),
		Tokens: string(raw["tokens"]), SpecText: string(raw["spec_text"]), SpecJSON: string(raw["spec_json"]), GateResult: string(raw["gate_result"]),
		Probe:  string(raw["probe"]),
		Render: judge.Image{MediaType: "image/png", Data: raw["render"]}, Reference: judge.Image{MediaType: "image/png", Data: raw["reference"]},
	}
	if prev, ok := raw["previous"]; ok {
		in.Previous = &judge.Image{MediaType: "image/png", Data: prev}
	}
	model := env.Model(gd)
	// The seed dispatches the judge "fresh every iteration", and the prompt names the
	// iteration: the key holds the loop and its iteration, so a cached answer serves only
	// the same iteration again (a redelivered gates.done, a report-only run repeating the
	// iteration it would be), never the next iteration's judgment of an identical render.
	key := env.CacheKey(events.KindRubric, ev.Tenant, model, rubric.PromptHash(), append(digests, rj.Feature, rj.Target, rj.State, rj.Appearance,
		rj.ReferenceSource, "loop="+strconv.Itoa(rj.Loop), "iteration="+strconv.Itoa(rj.LoopIteration))...)
	o, cached, err := stage.CachedCall(ctx, env, ev.Tenant, key, func(p judge.Provider) judge.Outcome[argus.Verdict] {
		return rubric.Judge(ctx, p, model, env.Instance, in, env.Params)
	})
	if err != nil {
		return nil, err
	}
	v := &rubricwire.Vote{Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw}
	for _, sl := range gd.Slots {
		switch sl.Name {
		case "render":
			v.Render = sl.Artifact.Blob
		case "gate_result":
			b := sl.Artifact.Blob
			v.GateResult = &b
		}
	}
	v.Judge.Instance, v.Judge.Cached = env.Instance, cached
	telemetry.JudgeCall(events.KindRubric, v.Judge, v.Status)
	if o.Status == events.VoteOK {
		o.Answer.Iteration = rj.LoopIteration
		data, _ := json.Marshal(o.Answer)
		v.Verdict = string(data)
	}
	return &events.VerdictEmitted{Kind: events.KindRubric, KindPart: v}, nil
}
