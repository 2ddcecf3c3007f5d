package judge

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// KindRunner is the Request.Kind of a runner call. A runner is not a judge (it produces
// the transcripts the `equivalence` judge compares), but it goes through the same
// providers, so recorded answers and logs need a kind to tell its calls apart.
const KindRunner = "runner"

var (
	runnerTemplates = map[string]Template{
		equivalence.VariantSkill:           mustTemplate("runner-skill.v1"),
		equivalence.VariantInstructionFile: mustTemplate("runner-instruction-file.v1"),
	}
	runnerSchema = Schema{Name: "runner_transcript", JSON: json.RawMessage(`{
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

// copySchema hands out a schema whose bytes the caller may keep or change without
// touching the one every request is built from.
func copySchema(s Schema) *Schema {
	return &Schema{Name: s.Name, JSON: append(json.RawMessage(nil), s.JSON...)}
}

// RunnerSchema is the structured-output schema of a runner's answer. ParseRunnerOutput
// enforces the same shape (and more: no blank entries) on providers that ignore schemas.
func RunnerSchema() *Schema { return copySchema(runnerSchema) }

func runnerTemplate(variant string) (Template, error) {
	t, ok := runnerTemplates[variant]
	if !ok {
		return Template{}, fmt.Errorf("runner variant %q: want %q or %q", variant, equivalence.VariantSkill, equivalence.VariantInstructionFile)
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
	return t.Hash + "+" + repairTemplate.Hash, nil
}

// RunnerMessages builds a runner prompt: the variant's wrapper rules as the system
// message, then the document and the case input, each fenced. The fence is what keeps a
// document or an adversarial case input from rewriting the wrapper's rules or the answer
// format; the wrapper still tells the model to carry the document out.
func RunnerMessages(variant, document, caseInput string) ([]Message, error) {
	t, err := runnerTemplate(variant)
	if err != nil {
		return nil, err
	}
	return []Message{
		{Role: "system", Parts: []Part{{Text: t.Text}}},
		{Role: "user", Parts: []Part{
			{Text: "The document under test:\n" + Fence("DOCUMENT", document)},
			{Text: "The case input:\n" + Fence("CASE INPUT", caseInput)},
			{Text: "Carry out the run as the rules above describe and answer with the JSON object only."},
		}},
	}, nil
}

// Usage says which provider and model answered a call, under which prompt, and at what
// cost. It is recorded with every runner transcript and judge answer so a reviewer can
// tell what produced it.
type Usage struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Instance   string `json:"instance,omitempty"`
	PromptHash string `json:"prompt_hash"`
	// PromptTokens and CompletionTokens add up every call, the repair re-ask included.
	PromptTokens     int   `json:"prompt_tokens,omitempty"`
	CompletionTokens int   `json:"completion_tokens,omitempty"`
	LatencyMillis    int64 `json:"latency_ms,omitempty"`
	// Calls counts Complete calls: 1, or 2 when a repair was asked for, 0 when the
	// input was refused before any call.
	Calls int `json:"calls"`
}

// JudgeInfo converts the usage to the event form recorded on verdicts.
func (u Usage) JudgeInfo() events.JudgeInfo {
	return events.JudgeInfo{
		Provider: u.Provider, Model: u.Model, Instance: u.Instance, PromptHash: u.PromptHash,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, LatencyMillis: u.LatencyMillis,
	}
}

// Outcome is one judge call's result for the kinds without slots (`equivalence`,
// `critic`): the same statuses an `ab` vote has, with the kind's parsed answer.
//
// Status is "ok", "schema_violation" (the answer stayed invalid after one repair re-ask;
// Raw keeps it for audit), "unavailable" (the provider failed) or "blocked" (the input
// was refused before any call, e.g. "missing input"; nothing was asked). Answer is the
// zero value unless Status is "ok".
type Outcome[T any] struct {
	Usage  Usage  `json:"usage"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Answer T      `json:"answer"`
	// Raw is the model's last invalid answer as received (cut to 2000 bytes).
	Raw string `json:"raw,omitempty"`
}

// askWithRepair sends req and, when parse rejects the answer, re-asks once with the
// problem named, exactly like JudgeAB. It returns the outcome and the last error seen
// (the provider's or parse's), for callers that report errors rather than statuses.
func askWithRepair[T any](ctx context.Context, p Provider, req Request, usage Usage, parse func([]byte) (T, error)) (out Outcome[T], last error) {
	out.Usage = usage
	start := time.Now()
	defer func() { out.Usage.LatencyMillis = time.Since(start).Milliseconds() }()
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := p.Complete(ctx, req)
		out.Usage.Calls++
		if err != nil {
			// As in JudgeAB, the caller tells a cancelled ctx (a shutdown) from an outage.
			out.Status, out.Error = "unavailable", err.Error()
			return out, err
		}
		if resp.Model != "" {
			out.Usage.Model = resp.Model
		}
		out.Usage.PromptTokens += resp.PromptTokens
		out.Usage.CompletionTokens += resp.CompletionTokens
		v, perr := parse([]byte(resp.Content))
		if perr == nil {
			out.Status, out.Answer, out.Error, out.Raw = "ok", v, "", ""
			return out, nil
		}
		out.Status, out.Error, out.Raw = "schema_violation", perr.Error(), truncate(resp.Content, 2000)
		last = perr
		repair, rerr := render(repairTemplate, map[string]string{"Problem": perr.Error()})
		if rerr != nil {
			out.Error = rerr.Error()
			return out, rerr
		}
		req.Messages = append(req.Messages,
			Message{Role: "assistant", Parts: []Part{{Text: resp.Content}}},
			Message{Role: "user", Parts: []Part{{Text: repair}}})
	}
	return out, last
}

// RunnerInput is one document applied to one case input.
type RunnerInput struct {
	// Key names the run for recorded answers and logs (e.g. "AC-7/case-2/candidate"); it
	// never reaches the model.
	Key string
	// Variant is equivalence.VariantSkill or equivalence.VariantInstructionFile.
	Variant   string
	Document  string
	CaseInput string
}

// RunInfo is what a runner call cost and, when it failed on the schema, what it said.
type RunInfo struct {
	Usage Usage `json:"usage"`
	// Raw is the last invalid answer (cut to 2000 bytes) when the run failed on the schema.
	Raw string `json:"raw,omitempty"`
}

// RunDocument asks p to apply one document to one case input and returns the parsed
// transcript. Like JudgeAB it re-asks once with the problem named when the answer does
// not parse. The error wraps ErrUnavailable when the provider failed and
// ErrSchemaViolation (and the parse error) when the answer stayed invalid; either way the
// case is blocked, since no comparison can be made without both transcripts.
func RunDocument(ctx context.Context, p Provider, model string, in RunnerInput, params Params) (equivalence.Transcript, RunInfo, error) {
	if model == "" {
		model = p.DefaultModel()
	}
	msgs, err := RunnerMessages(in.Variant, in.Document, in.CaseInput)
	if err != nil {
		return equivalence.Transcript{}, RunInfo{}, err
	}
	hash, _ := RunnerPromptHash(in.Variant)
	req := Request{Kind: KindRunner, Key: in.Key, Model: model, Messages: msgs, Schema: RunnerSchema(), Params: params}
	out, last := askWithRepair(ctx, p, req, Usage{Provider: p.Name(), Model: model, PromptHash: hash}, equivalence.ParseRunnerOutput)
	info := RunInfo{Usage: out.Usage, Raw: out.Raw}
	switch out.Status {
	case "ok":
		info.Raw = ""
		return out.Answer, info, nil
	case "unavailable":
		if errors.Is(last, ErrUnavailable) {
			return equivalence.Transcript{}, info, fmt.Errorf("runner %s: %w", in.Key, last)
		}
		return equivalence.Transcript{}, info, fmt.Errorf("runner %s: %w: %w", in.Key, ErrUnavailable, last)
	default:
		return equivalence.Transcript{}, info, fmt.Errorf("runner %s: %w after one repair: %w", in.Key, ErrSchemaViolation, last)
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
func RunnerKey(documentSHA256, caseID, runnerPromptVersion, model string, params Params) string {
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
