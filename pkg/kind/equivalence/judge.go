package equivalence

import (
	"context"
	"embed"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

//go:embed prompts/*.md
var prompts embed.FS

var (
	template = judge.MustTemplate(prompts, "equivalence.v1")
	// schema is answerSchema as the model is sent it.
	schema = judge.Schema{Name: "equivalence_verdict", JSON: AnswerSchema()}
)

// PromptHash identifies the `equivalence` instructions every answer was judged
// under (the judge template and the repair re-ask).
func PromptHash() string { return judge.PromptHash(template) }

// Schema is the structured-output schema of an equivalence answer. The one rule
// it cannot express (behaviour_delta must be non-empty for a regression or divergence) is
// enforced by ParseAnswer.
func Schema() *judge.Schema { return judge.CopySchema(schema) }

// Input is one case to judge: the two runs of it, never the documents and never
// their diff, so the judge can only weigh behaviour that actually happened.
type Input struct {
	// Key names the case for recorded answers and logs (e.g. "AC-7/case-2"); it never
	// reaches the model.
	Key string
	// CaseInput is the input both runs were given; it tells the judge what the runs were
	// responding to.
	CaseInput string
	// Original is the teacher transcript (cached per RunnerKey), Candidate the new run.
	Original, Candidate Transcript
}

// Messages builds the judge prompt: the rules first, then the case input and
// the two rendered transcripts, each fenced as untrusted data (a transcript of an
// adversarial case is expected to contain instructions aimed at whoever reads it).
func Messages(in Input) []judge.Message {
	return []judge.Message{
		{Role: "system", Parts: []judge.Part{{Text: template.Text}}},
		{Role: "user", Parts: []judge.Part{
			{Text: "The case input both runs were given:\n" + judge.Fence("CASE INPUT", in.CaseInput)},
			{Text: "The run under the original version:\n" + judge.Fence("ORIGINAL TRANSCRIPT", in.Original.Render())},
			{Text: "The run under the candidate version:\n" + judge.Fence("CANDIDATE TRANSCRIPT", in.Candidate.Render())},
			{Text: "Answer with the JSON object only."},
		}},
	}
}

// Judge asks p to compare the two transcripts of one case, re-asks once with the
// problem named when the answer is invalid, and returns the outcome. A transcript that
// does not validate (a blank run, say) is refused before any call with status "blocked":
// a comparison against nothing would only invite the judge to guess.
func Judge(ctx context.Context, p judge.Provider, model, instance string, in Input, params judge.Params) judge.Outcome[Answer] {
	c := judge.Call{Kind: events.KindEquivalence, Key: in.Key, Model: model, Instance: instance, PromptHash: PromptHash(), Params: params}
	for _, t := range []struct {
		name string
		tr   Transcript
	}{{"original", in.Original}, {"candidate", in.Candidate}} {
		if err := t.tr.Validate(); err != nil {
			return judge.Refused[Answer](p, c, "missing input: "+t.name+" transcript: "+err.Error())
		}
	}
	return judge.AskCall(ctx, p, c, Messages(in), Schema(), ParseAnswer)
}

// EquivalenceCase turns a judge outcome into the report row for caseID: ok becomes a
// verdict, schema_violation stays one, and unavailable or blocked become blocked. Every
// status but ok keeps the summary from passing.
func EquivalenceCase(caseID string, o judge.Outcome[Answer]) CaseResult {
	switch o.Status {
	case events.VoteOK:
		return OK(caseID, o.Answer)
	case events.VoteSchemaViolation:
		return SchemaViolation(caseID, o.Error)
	default:
		return Blocked(caseID, o.Error)
	}
}
