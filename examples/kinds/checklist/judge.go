package checklist

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

//go:embed prompts/*.md
var prompts embed.FS

var template = judge.MustTemplate(prompts, "checklist.v1")

// schema is the answer as the model is sent it.
var schema = judge.Schema{Name: "checklist_answer", JSON: []byte(`{"type": "object", "additionalProperties": false,
  "required": ["unmet", "note"],
  "properties": {"unmet": {"type": "array", "items": {"type": "integer", "minimum": 1}},
    "note": {"type": "string", "maxLength": 2000}}}`)}

// PromptHash identifies the checklist instructions every answer was judged under.
func PromptHash() string { return judge.PromptHash(template) }

// Answer is what the judge answers: the numbers of the unmet items and its evidence.
type Answer struct {
	Unmet []int  `json:"unmet"`
	Note  string `json:"note"`
}

// ParseAnswer reads one answer: a single JSON object with exactly the two keys, whole
// item numbers, a note of at most strictjson.MaxText characters.
func ParseAnswer(data []byte) (Answer, error) {
	var a Answer
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("not the answer object: %w", err)
	}
	if dec.More() {
		return Answer{}, fmt.Errorf("more than one JSON value")
	}
	if a.Unmet == nil {
		return Answer{}, fmt.Errorf("unmet: missing")
	}
	if r := strictjson.TooLong(a.Note); r != "" {
		return Answer{}, fmt.Errorf("note: %s", r)
	}
	return a, nil
}

// Input is one output to check against its items.
type Input struct {
	// Key names the job for recorded answers; it never reaches the model.
	Key    string
	Items  []string
	Output string
}

// Messages builds the prompt: the rules first, then the checklist and the output, each
// fenced as untrusted data.
func Messages(in Input) []judge.Message {
	var list strings.Builder
	for i, it := range in.Items {
		list.WriteString(strconv.Itoa(i+1) + ". " + it + "\n")
	}
	return []judge.Message{
		{Role: "system", Parts: []judge.Part{{Text: template.Text}}},
		{Role: "user", Parts: []judge.Part{
			{Text: "The checklist:\n" + judge.Fence("CHECKLIST", list.String())},
			{Text: "The output to check:\n" + judge.Fence("OUTPUT", in.Output)},
			{Text: "Answer with the JSON object only."},
		}},
	}
}

// Judge asks p about one output, re-asking once when the answer is invalid.
func Judge(ctx context.Context, p judge.Provider, model, instance string, in Input, params judge.Params) judge.Outcome[Answer] {
	c := judge.Call{Kind: Name, Key: in.Key, Model: model, Instance: instance, PromptHash: PromptHash(), Params: params}
	return judge.AskCall(ctx, p, c, Messages(in), judge.CopySchema(schema), ParseAnswer)
}
