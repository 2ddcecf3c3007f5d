package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/argus"
)

var rubricTemplate = mustTemplate("rubric.v1")

// RubricPromptHash identifies the rubric judge's instructions.
func RubricPromptHash() string { return rubricTemplate.Hash + "+" + repairTemplate.Hash }

// RubricInput is one rendered view to score. Its images and documents come from blob
// storage by digest; nothing of a diff or a builder note exists to be passed.
type RubricInput struct {
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
	Probe           string
	Render          Image
	Reference       Image
	// Previous is the last iteration's render, for the pairwise rank; nil on the first.
	Previous *Image
}

// RubricMessages builds the vision prompt: rules first; each anchor's material kept apart
// and labelled with the dimensions it may serve; every document fenced as data.
func RubricMessages(in RubricInput) []Message {
	ident := fmt.Sprintf("View: feature %q, target %q, state %q, appearance %q; iteration %d; reference source %q.",
		in.Feature, in.Target, in.State, in.Appearance, in.Iteration, in.ReferenceSource)
	user := []Part{
		{Text: ident},
		{Text: "The rubric (dimensions, thresholds, anchors):\n" + Fence("RUBRIC", in.RubricJSON)},
		{Text: "Design-system anchor (token_compliance, layout_spacing, typography, hierarchy), the design tokens:\n" + Fence("TOKENS", in.Tokens)},
		{Text: "Spec-text anchor, the specification:\n" + Fence("SPEC TEXT", in.SpecText)},
		{Text: "Spec-text anchor (functional_correctness, accessibility), the probe of the rendered page (its accessibility tree and DOM facts; labels cut to 256 characters):\n" + Fence("PROBE", in.Probe)},
		{Text: "Reference anchor (visual_fidelity only), the reference image, next:"},
		{Image: &in.Reference},
		{Text: "The render under review, next:"},
		{Image: &in.Render},
	}
	if in.Previous != nil {
		user = append(user, Part{Text: "The previous iteration's render (for closer_to_reference_than_prev only), next:"}, Part{Image: in.Previous})
	} else {
		user = append(user, Part{Text: "There is no previous render: set closer_to_reference_than_prev to null."})
	}
	user = append(user, Part{Text: "Answer with the verdict JSON object only."})
	return []Message{{Role: "system", Parts: []Part{{Text: rubricTemplate.Text}}}, {Role: "user", Parts: user}}
}

// rubricSchema is the verdict schema for structured output, with the rubric's own
// dimensions spelled out so strict servers can hold the model to them.
func rubricSchema(r *argus.Rubric) *Schema {
	dims := map[string]any{}
	names := r.DimensionNames()
	for _, d := range names {
		dims[d] = map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"score", "anchor", "evidence"},
			"properties": map[string]any{
				"score":    map[string]any{"type": "number", "enum": []float64{0, 0.5, 1}},
				"anchor":   map[string]any{"type": "string", "enum": []string{r.Dimensions[d].Anchor}},
				"evidence": map[string]any{"type": "string"},
			},
		}
	}
	schema := map[string]any{
		"type": "object", "additionalProperties": false,
		"required": []string{"iteration", "feature", "target", "state", "appearance", "reference_source", "dimensions",
			"closer_to_reference_than_prev", "all_pass", "failed_dimensions", "notes"},
		"properties": map[string]any{
			"iteration": map[string]any{"type": "integer"}, "feature": map[string]any{"type": "string"},
			"target": map[string]any{"type": "string"}, "state": map[string]any{"type": "string"},
			"appearance": map[string]any{"type": "string"}, "reference_source": map[string]any{"type": "string", "enum": []string{"human", "candidate"}},
			"dimensions":                    map[string]any{"type": "object", "additionalProperties": false, "required": names, "properties": dims},
			"closer_to_reference_than_prev": map[string]any{"type": []string{"boolean", "null"}},
			"all_pass":                      map[string]any{"type": "boolean"},
			"failed_dimensions":             map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"notes":                         map[string]any{"type": "string"},
		},
	}
	data, _ := json.Marshal(schema)
	return &Schema{Name: "rubric_verdict", JSON: data}
}

// JudgeRubric asks p for a verdict on one view, with one repair re-ask. The view's
// identity (iteration, feature, target, state, appearance, reference source) is the
// judge service's to state, not the model's: it is filled in from the input before the
// verdict is checked against the schema, so a model cannot misfile its verdict.
func JudgeRubric(ctx context.Context, p Provider, model, instance string, in RubricInput, params Params) Outcome[argus.Verdict] {
	if model == "" {
		model = p.DefaultModel()
	}
	req := Request{Kind: "rubric", Key: in.Key, Model: model, Messages: RubricMessages(in), Schema: rubricSchema(in.Rubric), Params: params}
	parse := func(data []byte) (argus.Verdict, error) {
		var m map[string]any
		if err := json.Unmarshal(unfence(data), &m); err != nil {
			return argus.Verdict{}, fmt.Errorf("answer is not a JSON object: %w", err)
		}
		m["iteration"], m["feature"], m["target"] = in.Iteration, in.Feature, in.Target
		m["state"], m["appearance"], m["reference_source"] = in.State, in.Appearance, in.ReferenceSource
		fixed, _ := json.Marshal(m)
		v, err := argus.ParseVerdict(fixed)
		if err != nil {
			return argus.Verdict{}, err
		}
		return *v, nil
	}
	out, _ := askWithRepair(ctx, p, req, Usage{Provider: p.Name(), Model: model, Instance: instance, PromptHash: RubricPromptHash()}, parse)
	return out
}

// unfence strips one ```json fence around an answer, as models often add one.
func unfence(b []byte) []byte {
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "```") {
		return b
	}
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(s, "```"), "json"), "JSON")
	if i := strings.LastIndex(s, "```"); i >= 0 {
		s = s[:i]
	}
	return []byte(s)
}
