package judge

import (
	"context"
	"encoding/json"

	"github.com/tribunal-dev/tribunal/pkg/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

var (
	equivalenceTemplate = mustTemplate("equivalence.v1")
	equivalenceSchema   = Schema{Name: "equivalence_verdict", JSON: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["verdict", "behaviour_delta", "efficiency_signal"],
  "properties": {
    "verdict": {"type": "string", "enum": ["equivalent", "candidate-regressed", "candidate-diverged"]},
    "behaviour_delta": {"type": "string"},
    "efficiency_signal": {
      "type": "object",
      "additionalProperties": false,
      "required": ["original_directness", "candidate_directness", "interpretation_notes"],
      "properties": {
        "original_directness": {"type": "integer", "minimum": 1, "maximum": 5},
        "candidate_directness": {"type": "integer", "minimum": 1, "maximum": 5},
        "interpretation_notes": {"type": "string", "minLength": 1}
      }
    }
  }
}`)}
)

// EquivalencePromptHash identifies the `equivalence` instructions every answer was judged
// under (the judge template and the repair re-ask).
func EquivalencePromptHash() string { return equivalenceTemplate.Hash + "+" + repairTemplate.Hash }

// EquivalenceSchema is the structured-output schema of an equivalence answer. The one rule
// it cannot express (behaviour_delta must be non-empty for a regression or divergence) is
// enforced by equivalence.ParseAnswer.
func EquivalenceSchema() *Schema { return copySchema(equivalenceSchema) }

// EquivalenceInput is one case to judge: the two runs of it, never the documents and never
// their diff, so the judge can only weigh behaviour that actually happened.
type EquivalenceInput struct {
	// Key names the case for recorded answers and logs (e.g. "AC-7/case-2"); it never
	// reaches the model.
	Key string
	// CaseInput is the input both runs were given; it tells the judge what the runs were
	// responding to.
	CaseInput string
	// Original is the teacher transcript (cached per RunnerKey), Candidate the new run.
	Original, Candidate equivalence.Transcript
}

// EquivalenceMessages builds the judge prompt: the rules first, then the case input and
// the two rendered transcripts, each fenced as untrusted data (a transcript of an
// adversarial case is expected to contain instructions aimed at whoever reads it).
func EquivalenceMessages(in EquivalenceInput) []Message {
	return []Message{
		{Role: "system", Parts: []Part{{Text: equivalenceTemplate.Text}}},
		{Role: "user", Parts: []Part{
			{Text: "The case input both runs were given:\n" + Fence("CASE INPUT", in.CaseInput)},
			{Text: "The run under the original version:\n" + Fence("ORIGINAL TRANSCRIPT", in.Original.Render())},
			{Text: "The run under the candidate version:\n" + Fence("CANDIDATE TRANSCRIPT", in.Candidate.Render())},
			{Text: "Answer with the JSON object only."},
		}},
	}
}

// JudgeEquivalence asks p to compare the two transcripts of one case, re-asks once with the
// problem named when the answer is invalid, and returns the outcome. A transcript that
// does not validate (a blank run, say) is refused before any call with status "blocked":
// a comparison against nothing would only invite the judge to guess.
func JudgeEquivalence(ctx context.Context, p Provider, model, instance string, in EquivalenceInput, params Params) Outcome[equivalence.Answer] {
	if model == "" {
		model = p.DefaultModel()
	}
	usage := Usage{Provider: p.Name(), Model: model, Instance: instance, PromptHash: EquivalencePromptHash()}
	for _, t := range []struct {
		name string
		tr   equivalence.Transcript
	}{{"original", in.Original}, {"candidate", in.Candidate}} {
		if err := t.tr.Validate(); err != nil {
			return Outcome[equivalence.Answer]{Usage: usage, Status: "blocked", Error: "missing input: " + t.name + " transcript: " + err.Error()}
		}
	}
	req := Request{Kind: events.KindEquivalence, Key: in.Key, Model: model, Messages: EquivalenceMessages(in), Schema: EquivalenceSchema(), Params: params}
	out, _ := askWithRepair(ctx, p, req, usage, equivalence.ParseAnswer)
	return out
}

// EquivalenceCase turns a judge outcome into the report row for caseID: ok becomes a
// verdict, schema_violation stays one, and unavailable or blocked become blocked. Every
// status but ok keeps the summary from passing.
func EquivalenceCase(caseID string, o Outcome[equivalence.Answer]) equivalence.CaseResult {
	switch o.Status {
	case "ok":
		return equivalence.OK(caseID, o.Answer)
	case "schema_violation":
		return equivalence.SchemaViolation(caseID, o.Error)
	default:
		return equivalence.Blocked(caseID, o.Error)
	}
}
