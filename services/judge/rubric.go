package judge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/argus"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// handleRubric scores one rendered view against its rubric.
func (s *Service) handleRubric(ctx context.Context, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	rj := gd.Rubric
	if rj == nil {
		return nil, fmt.Errorf("rubric gates.done without view context")
	}
	raw := map[string][]byte{}
	var digests []string
	for _, sl := range gd.Slots {
		data, _, err := blob.ReadAll(ctx, s.store, blob.Ref{Tenant: ev.Tenant, SHA256: sl.Artifact.Blob.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", sl.Name, err)
		}
		raw[sl.Name] = data
		digests = append(digests, sl.Name+"="+sl.Artifact.Blob.SHA256)
	}
	rubric, err := argus.ParseRubric(raw["rubric"])
	if err != nil {
		return nil, fmt.Errorf("rubric: %w", err)
	}
	in := pj.RubricInput{
		Key: ev.JobID, Feature: rj.Feature, Target: rj.Target, State: rj.State, Appearance: rj.Appearance,
		ReferenceSource: rj.ReferenceSource, Iteration: rj.LoopIteration, Rubric: rubric, RubricJSON: string(raw["rubric"]),
		Tokens: string(raw["tokens"]), SpecText: string(raw["spec_text"]), Probe: string(raw["probe"]),
		Render: pj.Image{MediaType: "image/png", Data: raw["render"]}, Reference: pj.Image{MediaType: "image/png", Data: raw["reference"]},
	}
	if prev, ok := raw["previous"]; ok {
		in.Previous = &pj.Image{MediaType: "image/png", Data: prev}
	}
	model := s.model(gd)
	key := s.answerKey("rubric", model, pj.RubricPromptHash(), append(digests, rj.Feature, rj.Target, rj.State, rj.Appearance, rj.ReferenceSource)...)
	var o pj.Outcome[argus.Verdict]
	cached := s.cachedAnswer(ctx, key, &o)
	if !cached {
		o = pj.JudgeRubric(ctx, s.provider, model, s.instance, in, s.params)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.storeAnswer(ctx, key, o.Status, o)
	}
	v := &events.RubricVote{Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw}
	for _, sl := range gd.Slots {
		if sl.Name == "render" {
			v.Render = sl.Artifact.Blob
		}
	}
	v.Judge.Instance, v.Judge.Cached = s.instance, cached
	telemetry.JudgeCall(events.KindRubric, v.Judge, v.Status)
	if o.Status == "ok" {
		o.Answer.Iteration = rj.LoopIteration
		data, _ := json.Marshal(o.Answer)
		v.Verdict = string(data)
	}
	return &events.VerdictEmitted{Kind: events.KindRubric, Rubric: v}, nil
}
