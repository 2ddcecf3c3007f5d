package critic

import (
	"context"
	"embed"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

//go:embed prompts/*.md
var prompts embed.FS

var (
	template = judge.MustTemplate(prompts, "critic.v1")
	// schema is answerSchema as the model is sent it.
	schema = judge.Schema{Name: "critic_scores", JSON: AnswerSchema()}
)

// PromptHash identifies the `critic` instructions every answer was judged under.
func PromptHash() string { return judge.PromptHash(template) }

// Schema is the structured-output schema of a critic answer.
func Schema() *judge.Schema { return judge.CopySchema(schema) }

// Input is one output to score against the task it was produced for.
type Input struct {
	// Key names the job for recorded answers and logs; it never reaches the model.
	Key    string
	Task   string
	Output string
}

// Messages builds the critic prompt: the rubric first, then the task and the output,
// each fenced as untrusted data, since an output under review has every reason to try to
// talk its way to a pass.
func Messages(in Input) []judge.Message {
	return []judge.Message{
		{Role: "system", Parts: []judge.Part{{Text: template.Text}}},
		{Role: "user", Parts: []judge.Part{
			{Text: "The task:\n" + judge.Fence("TASK", in.Task)},
			{Text: "The output to score:\n" + judge.Fence("OUTPUT", in.Output)},
			{Text: "Answer with the JSON object only."},
		}},
	}
}

// Judge asks p to score one output, re-asks once with the problem named when the
// answer is invalid, and returns the outcome; critic.Check derives the verdict from it.
// An empty task or output is refused before any call: status "blocked", error exactly
// "missing input".
func Judge(ctx context.Context, p judge.Provider, model, instance string, in Input, params judge.Params) judge.Outcome[Answer] {
	c := judge.Call{Kind: events.KindCritic, Key: in.Key, Model: model, Instance: instance, PromptHash: PromptHash(), Params: params}
	if err := CheckInputs(in.Task, in.Output); err != nil {
		return judge.Refused[Answer](p, c, err.Error())
	}
	return judge.AskCall(ctx, p, c, Messages(in), Schema(), ParseAnswer)
}

// CriticResult turns a judge outcome into the recorded result: ok answers are checked and
// derived (never taken at their word), everything else carries its reason and no verdict.
func CriticResult(o judge.Outcome[Answer]) Result {
	switch o.Status {
	case events.VoteOK:
		r, err := Check(o.Answer)
		if err != nil {
			return SchemaViolation(err.Error())
		}
		return r
	case events.VoteSchemaViolation:
		return SchemaViolation(o.Error)
	default:
		return Blocked(o.Error)
	}
}
