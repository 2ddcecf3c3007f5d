// Package rubric is the `rubric` judge kind: a rendered UI view judged against its spec,
// tokens and reference, looped to sign-off (the Argus workflow of seed 004). The Argus rules
// themselves (spec lint, contrast, gates, the loop arithmetic, verdicts, feature status)
// are in pkg/kind/rubric/argus; this folder is what the kind does at each stage of tribunal's flow.
package rubric

import (
	"context"
	"embed"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

//go:embed prompts/*.md
var prompts embed.FS

var template = judge.MustTemplate(prompts, "rubric.v2")

// PromptHash identifies the rubric judge's instructions.
func PromptHash() string { return judge.PromptHash(template) }

// Input is one rendered view to score. Its images and documents come from blob
// storage by digest; nothing of a diff or a builder note exists to be passed.
type Input struct {
	// Key names the job for recorded answers and logs; it never reaches the model.
	Key             string
	Feature         string
	Target          string
	State           string
	Appearance      string
	ReferenceSource string
	Iteration       int
	Rubric          *argus.Rubric
	RubricJSON      string
	Tokens          string
	SpecText        string
	// SpecJSON is spec.json as the judge reads it (argus.JudgeSpec): its contract, no paths.
	SpecJSON string
	// GateResult is the render's gate-result.json (all green).
	GateResult string
	Probe      string
	Render     judge.Image
	Reference  judge.Image
	// Previous is the last iteration's render, for the pairwise rank; nil on the first.
	Previous *judge.Image
}

// Messages builds the vision prompt: rules first; each anchor's material kept apart
// and labelled with the dimensions it may serve; every document fenced as data.
func Messages(in Input) []judge.Message {
	ident := fmt.Sprintf("View: feature %q, target %q, state %q, appearance %q; iteration %d; reference source %q.",
		in.Feature, in.Target, in.State, in.Appearance, in.Iteration, in.ReferenceSource)
	user := []judge.Part{
		{Text: ident},
		{Text: "The rubric (dimensions, thresholds, anchors):\n" + judge.Fence("RUBRIC", in.RubricJSON)},
		{Text: "Design-system anchor (token_compliance, layout_spacing, typography, hierarchy), the design tokens:\n" + judge.Fence("TOKENS", in.Tokens)},
		{Text: "Spec-text anchor, the specification:\n" + judge.Fence("SPEC TEXT", in.SpecText)},
		{Text: "Spec-text anchor (functional_correctness, accessibility), the specification's machine contract (spec.json: states, component contracts, a11y contract):\n" + judge.Fence("SPEC JSON", in.SpecJSON)},
		{Text: "The deterministic gates of this render (gate-result.json; all green, or you would not be asked):\n" + judge.Fence("GATE RESULT", in.GateResult)},
		{Text: "Spec-text anchor (functional_correctness, accessibility), the probe of the rendered page (its accessibility tree and DOM facts; labels cut to 256 characters):\n" + judge.Fence("PROBE", in.Probe)},
		{Text: "Reference anchor (visual_fidelity only), the reference image, next:"},
		{Image: &in.Reference},
		{Text: "The render under review, next:"},
		{Image: &in.Render},
	}
	if in.Previous != nil {
		user = append(user, judge.Part{Text: "The previous iteration's render (for closer_to_reference_than_prev only), next:"}, judge.Part{Image: in.Previous})
	} else {
		user = append(user, judge.Part{Text: "There is no previous render: set closer_to_reference_than_prev to null."})
	}
	user = append(user, judge.Part{Text: "Answer with the verdict JSON object only."})
	return []judge.Message{{Role: "system", Parts: []judge.Part{{Text: template.Text}}}, {Role: "user", Parts: user}}
}

// schema is the verdict schema for structured output, with the rubric's own
// dimensions spelled out so strict servers can hold the model to them; the answer is
// checked against the same schema (argus.ParseJudgeVerdict).
func schema(r *argus.Rubric) *judge.Schema {
	return &judge.Schema{Name: "rubric_verdict", JSON: argus.JudgeVerdictSchema(r)}
}

// Judge asks p for a verdict on one view, with one repair re-ask. The view's
// identity (iteration, feature, target, state, appearance, reference source) is the
// judge service's to state, not the model's: it is filled in from the input before the
// verdict is checked against the schema, so a model cannot misfile its verdict.
func Judge(ctx context.Context, p judge.Provider, model, instance string, in Input, params judge.Params) judge.Outcome[argus.Verdict] {
	id := argus.ViewIdentity{Iteration: in.Iteration, Feature: in.Feature, Target: in.Target, State: in.State,
		Appearance: in.Appearance, ReferenceSource: in.ReferenceSource}
	parse := func(data []byte) (argus.Verdict, error) {
		v, err := argus.ParseJudgeVerdict(in.Rubric, id, data)
		if err != nil {
			return argus.Verdict{}, err
		}
		return *v, nil
	}
	c := judge.Call{Kind: events.KindRubric, Key: in.Key, Model: model, Instance: instance, PromptHash: PromptHash(), Params: params}
	return judge.AskCall(ctx, p, c, Messages(in), schema(in.Rubric), parse)
}
