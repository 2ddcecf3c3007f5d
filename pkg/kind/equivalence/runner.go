package equivalence

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// KindRunner is the Request.Kind of a runner call. A runner is not a judge (it produces
// the transcripts the `equivalence` judge compares), but it goes through the same
// providers, so recorded answers and logs need a kind to tell its calls apart.
const KindRunner = "runner"

var _ kind.Requesting = Kind{}

// RenderRequests implements kind.Requesting: the renderer runs the documents.
func (Kind) RenderRequests() []string { return []string{KindRunner} }

var (
	runnerTemplates = map[string]judge.Template{
		VariantSkill:           judge.MustTemplate(prompts, "runner-skill.v1"),
		VariantInstructionFile: judge.MustTemplate(prompts, "runner-instruction-file.v1"),
	}
	runnerSchema = judge.Schema{Name: "runner_transcript", JSON: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["transcript", "self_report"],
  "properties": {
    "transcript": {"type": "string", "minLength": 1},
    "self_report": {
      "type": "object",
      "additionalProperties": false,
      "required": ["steps_followed", "steps_skipped", "ambiguities", "improvisation", "deviation_urges", "final_output"],
      "properties": {
        "steps_followed": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "steps_skipped": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "ambiguities": {"type": "array", "items": {
          "type": "object",
          "additionalProperties": false,
          "required": ["question", "resolution"],
          "properties": {
            "question": {"type": "string", "minLength": 1},
            "resolution": {"type": "string", "minLength": 1}
          }
        }},
        "improvisation": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "deviation_urges": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "final_output": {"type": "string", "minLength": 1}
      }
    }
  }
}`)}
)

// RunnerSchema is the structured-output schema of a runner's answer. ParseRunnerOutput
// enforces the same shape (and more: no blank entries) on providers that ignore schemas.
func RunnerSchema() *judge.Schema { return judge.CopySchema(runnerSchema) }

func runnerTemplate(variant string) (judge.Template, error) {
	t, ok := runnerTemplates[variant]
	if !ok {
		return judge.Template{}, fmt.Errorf("runner variant %q: want %q or %q", variant, VariantSkill, VariantInstructionFile)
	}
	return t, nil
}

// RunnerPromptHash identifies the runner instructions (the variant's template and the
// repair re-ask) a transcript was produced under. It is the runnerPromptVersion to pass
// to RunnerKey: a teacher transcript made under other instructions must not be reused.
func RunnerPromptHash(variant string) (string, error) {
	t, err := runnerTemplate(variant)
	if err != nil {
		return "", err
	}
	return judge.PromptHash(t), nil
}

// RunnerMessages builds a runner prompt: the variant's wrapper rules as the system
// message, then the document and the case input, each fenced. The fence is what keeps a
// document or an adversarial case input from rewriting the wrapper's rules or the answer
// format; the wrapper still tells the model to carry the document out.
func RunnerMessages(variant, document, caseInput string) ([]judge.Message, error) {
	t, err := runnerTemplate(variant)
	if err != nil {
		return nil, err
	}
	return []judge.Message{
		{Role: "system", Parts: []judge.Part{{Text: t.Text}}},
		{Role: "user", Parts: []judge.Part{
			{Text: "The document under test:\n" + judge.Fence("DOCUMENT", document)},
			{Text: "The case input:\n" + judge.Fence("CASE INPUT", caseInput)},
			{Text: "Carry out the run as the rules above describe and answer with the JSON object only."},
		}},
	}, nil
}

// RunnerInput is one document applied to one case input.
type RunnerInput struct {
	// Key names the run for recorded answers and logs (e.g. "AC-7/case-2/candidate"); it
	// never reaches the model.
	Key string
	// Variant is VariantSkill or VariantInstructionFile.
	Variant   string
	Document  string
	CaseInput string
}

// RunInfo is what a runner call cost and, when it failed on the schema, what it said.
type RunInfo struct {
	Usage judge.Usage `json:"usage"`
	// Raw is the last invalid answer (cut to 2000 bytes) when the run failed on the schema.
	Raw string `json:"raw,omitempty"`
}

// RunDocument asks p to apply one document to one case input and returns the parsed
// transcript. Like JudgeAB it re-asks once with the problem named when the answer does
// not parse. The error wraps ErrUnavailable when the provider failed and
// ErrSchemaViolation (and the parse error) when the answer stayed invalid; either way the
// case is blocked, since no comparison can be made without both transcripts.
func RunDocument(ctx context.Context, p judge.Provider, model string, in RunnerInput, params judge.Params) (Transcript, RunInfo, error) {
	if model == "" {
		model = p.DefaultModel()
	}
	msgs, err := RunnerMessages(in.Variant, in.Document, in.CaseInput)
	if err != nil {
		return Transcript{}, RunInfo{}, err
	}
	hash, _ := RunnerPromptHash(in.Variant)
	req := judge.Request{Kind: KindRunner, Key: in.Key, Model: model, Messages: msgs, Schema: RunnerSchema(), Params: params}
	out, last := judge.Ask(ctx, p, req, judge.Usage{Provider: p.Name(), Model: model, PromptHash: hash}, ParseRunnerOutput)
	info := RunInfo{Usage: out.Usage, Raw: out.Raw}
	switch out.Status {
	case events.VoteOK:
		info.Raw = ""
		return out.Answer, info, nil
	case events.VoteUnavailable:
		if errors.Is(last, judge.ErrUnavailable) {
			return Transcript{}, info, fmt.Errorf("runner %s: %w", in.Key, last)
		}
		return Transcript{}, info, fmt.Errorf("runner %s: %w: %w", in.Key, judge.ErrUnavailable, last)
	default:
		return Transcript{}, info, fmt.Errorf("runner %s: %w after one repair: %w", in.Key, judge.ErrSchemaViolation, last)
	}
}

// RunnerKey is the baseline-cache key of one runner transcript. The teacher (original)
// transcript of a case is captured once per key and reused in every later round, never
// re-run: a second teacher run costs a call and, since sampling varies, could differ from
// the first in ways the judge would then attribute to the candidate. The key therefore
// covers everything that can legitimately change a transcript: the document's bytes
// (documentSHA256), the case (caseID; pass TransferCase.CacheID so an edited input is a
// new case), the runner instructions (runnerPromptVersion, from RunnerPromptHash, which
// also fixes the variant), the resolved model name and every sampling parameter.
//
// Each component is length-prefixed before hashing, so no two different inputs can
// produce the same byte stream; an unset temperature or seed is distinct from 0.
func RunnerKey(documentSHA256, caseID, runnerPromptVersion, model string, params judge.Params) string {
	temp, seed := "unset", "unset"
	if params.Temperature != nil {
		temp = strconv.FormatFloat(float64(*params.Temperature), 'g', -1, 32)
	}
	if params.Seed != nil {
		seed = strconv.Itoa(*params.Seed)
	}
	h := sha256.New()
	for _, part := range []string{
		"tribunal runner baseline v1", documentSHA256, caseID, runnerPromptVersion, model,
		temp, seed, strconv.Itoa(params.MaxTokens),
	} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return "runner-baseline:v1:" + hex.EncodeToString(h.Sum(nil))
}
