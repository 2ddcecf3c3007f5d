package judge

import (
	"context"
	"encoding/json"

	"github.com/tribunal-dev/tribunal/pkg/critic"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

var (
	criticTemplate = mustTemplate("critic.v1")
	// Every key is required, as in the seed's output object (critic.ParseAnswer refuses
	// an answer without verdict or quality); the claims are compared, never trusted.
	criticSchema = Schema{Name: "critic_scores", JSON: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["correctness", "slop", "scope", "verdict", "quality", "rationale"],
  "properties": {
    "correctness": {"type": "integer", "minimum": 0, "maximum": 10},
    "slop": {"type": "integer", "minimum": 0, "maximum": 10},
    "scope": {"type": "integer", "minimum": 0, "maximum": 10},
    "verdict": {"type": "string", "enum": ["pass", "revise", "reject"]},
    "quality": {"type": "integer", "minimum": 0, "maximum": 10},
    "rationale": {"type": "string", "minLength": 1}
  }
}`)}
)

// CriticPromptHash identifies the `critic` instructions every answer was judged under.
func CriticPromptHash() string { return criticTemplate.Hash + "+" + repairTemplate.Hash }

// CriticSchema is the structured-output schema of a critic answer.
func CriticSchema() *Schema { return copySchema(criticSchema) }

// CriticInput is one output to score against the task it was produced for.
type CriticInput struct {
	// Key names the job for recorded answers and logs; it never reaches the model.
	Key    string
	Task   string
	Output string
}

// CriticMessages builds the critic prompt: the rubric first, then the task and the output,
// each fenced as untrusted data, since an output under review has every reason to try to
// talk its way to a pass.
func CriticMessages(in CriticInput) []Message {
	return []Message{
		{Role: "system", Parts: []Part{{Text: criticTemplate.Text}}},
		{Role: "user", Parts: []Part{
			{Text: "The task:\n" + Fence("TASK", in.Task)},
			{Text: "The output to score:\n" + Fence("OUTPUT", in.Output)},
			{Text: "Answer with the JSON object only."},
		}},
	}
}

// JudgeCritic asks p to score one output, re-asks once with the problem named when the
// answer is invalid, and returns the outcome; critic.Check derives the verdict from it.
// An empty task or output is refused before any call: status "blocked", error exactly
// "missing input".
func JudgeCritic(ctx context.Context, p Provider, model, instance string, in CriticInput, params Params) Outcome[critic.Answer] {
	if model == "" {
		model = p.DefaultModel()
	}
	usage := Usage{Provider: p.Name(), Model: model, Instance: instance, PromptHash: CriticPromptHash()}
	if err := critic.CheckInputs(in.Task, in.Output); err != nil {
		return Outcome[critic.Answer]{Usage: usage, Status: "blocked", Error: err.Error()}
	}
	req := Request{Kind: events.KindCritic, Key: in.Key, Model: model, Messages: CriticMessages(in), Schema: CriticSchema(), Params: params}
	out, _ := askWithRepair(ctx, p, req, usage, critic.ParseAnswer)
	return out
}

// CriticResult turns a judge outcome into the recorded result: ok answers are checked and
// derived (never taken at their word), everything else carries its reason and no verdict.
func CriticResult(o Outcome[critic.Answer]) critic.Result {
	switch o.Status {
	case "ok":
		r, err := critic.Check(o.Answer)
		if err != nil {
			return critic.SchemaViolation(err.Error())
		}
		return r
	case "schema_violation":
		return critic.SchemaViolation(o.Error)
	default:
		return critic.Blocked(o.Error)
	}
}
