package equivalence

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

func TestRunnerMessagesFence(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{VariantSkill, VariantInstructionFile} {
		t.Run(variant, func(t *testing.T) {
			msgs, err := RunnerMessages(variant, "Step 1: greet.\nStep 2: summarise.", judgetest.Injection)
			if err != nil {
				t.Fatal(err)
			}
			judgetest.AssertFenced(t, msgs, "CASE INPUT")
			u := judgetest.UserText(msgs)
			if d, c := strings.Index(u, "-----BEGIN DOCUMENT"), strings.Index(u, "Step 1: greet."); d < 0 || c < d || c > strings.Index(u, "-----END DOCUMENT nonce=") {
				t.Errorf("document not fenced:\n%s", u)
			}
			tpl, _ := runnerTemplate(variant)
			if msgs[0].Parts[0].Text != tpl.Text {
				t.Error("system message is not the variant's template")
			}
		})
	}
	skill, _ := RunnerMessages(VariantSkill, "d", "i")
	file, _ := RunnerMessages(VariantInstructionFile, "d", "i")
	if skill[0].Parts[0].Text == file[0].Parts[0].Text {
		t.Error("the two variants share one prompt")
	}
	if !strings.Contains(file[0].Parts[0].Text, "read-only") {
		t.Error("the instruction-file runner is not told it is read-only")
	}
	if _, err := RunnerMessages("agent", "d", "i"); err == nil {
		t.Error("unknown variant accepted")
	}
	if _, err := RunnerPromptHash("agent"); err == nil {
		t.Error("unknown variant hashed")
	}
}

func TestRunnerPromptsDefineSelfReport(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{VariantSkill, VariantInstructionFile} {
		tpl, _ := runnerTemplate(variant)
		for _, f := range []string{"steps_followed", "steps_skipped", "ambiguities", "improvisation", "deviation_urges", "final_output", `"question"`, `"resolution"`, `"transcript"`, `"self_report"`} {
			if !strings.Contains(tpl.Text, f) {
				t.Errorf("%s prompt does not mention %s", variant, f)
			}
		}
		if strings.Contains(tpl.Text, "{{") {
			t.Errorf("%s prompt contains template actions but is sent verbatim", variant)
		}
	}
}

const kindsGoodRun = `{"transcript": "did the thing", "self_report": {"steps_followed": ["a"], "steps_skipped": [], "ambiguities": [], "improvisation": [], "deviation_urges": [], "final_output": "done"}}`

func TestRunDocumentRepair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := RunnerInput{Key: "AC-1/c1/original", Variant: VariantSkill, Document: "doc", CaseInput: "input"}

	p, seen := judgetest.AnswersInTurn(`{"transcript": "did the thing"}`, kindsGoodRun)
	tr, info, err := RunDocument(ctx, p, "", in, judge.Params{})
	if err != nil {
		t.Fatalf("invalid then valid: %v", err)
	}
	if len(*seen) != 2 || info.Usage.Calls != 2 {
		t.Fatalf("calls = %d/%d, want 2", len(*seen), info.Usage.Calls)
	}
	if tr.SelfReport.FinalOutput != "done" || info.Raw != "" {
		t.Errorf("transcript %+v, raw %q", tr, info.Raw)
	}
	second := (*seen)[1]
	if second.Kind != KindRunner || second.Key != in.Key || second.Model != "test-model" || second.Schema == nil || second.Schema.Name != "runner_transcript" {
		t.Errorf("request = %+v", second)
	}
	if n := len(second.Messages); n != 4 || second.Messages[2].Role != "assistant" || !strings.Contains(judgetest.UserText(second.Messages[3:]), "self_report") {
		t.Errorf("repair messages wrong (%d): %+v", n, second.Messages)
	}
	if info.Usage.Model != "test-model" || info.Usage.Sampling == nil || info.Usage.Sampling.ReportedModel != "served-model" || info.Usage.PromptTokens != 20 || info.Usage.CompletionTokens != 10 {
		t.Errorf("usage = %+v", info.Usage)
	}
	if h, _ := RunnerPromptHash(VariantSkill); info.Usage.PromptHash != h {
		t.Errorf("prompt hash %q, want %q", info.Usage.PromptHash, h)
	}

	p, seen = judgetest.AnswersInTurn("I did it.", `{"transcript": ""}`)
	_, info, err = RunDocument(ctx, p, "m", in, judge.Params{})
	if !errors.Is(err, judge.ErrSchemaViolation) || len(*seen) != 2 {
		t.Fatalf("invalid twice: err %v after %d calls", err, len(*seen))
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "self_report" {
		t.Errorf("error does not carry the last field error: %v", err)
	}
	if info.Raw != `{"transcript": ""}` {
		t.Errorf("raw = %q", info.Raw)
	}

	down := judgetest.FuncProvider(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{}, errors.New("connection refused")
	})
	if _, _, err := RunDocument(ctx, down, "m", in, judge.Params{}); !errors.Is(err, judge.ErrUnavailable) {
		t.Errorf("provider down: %v, want ErrUnavailable", err)
	}
	if _, _, err := RunDocument(ctx, p, "m", RunnerInput{Variant: "agent"}, judge.Params{}); err == nil {
		t.Error("unknown variant ran")
	}
}

func TestRunnerKey(t *testing.T) {
	t.Parallel()
	f := func(v float32) *float32 { return &v }
	i := func(v int) *int { return &v }
	type args struct {
		doc, caseID, prompt, model string
		params                     judge.Params
	}
	base := args{"aa11", "c1@sha256:00", "runner-skill.v1:0123+repair.v1:4567", "gpt-x", judge.Params{Temperature: f(0), Seed: i(7), MaxTokens: 100}}
	key := func(a args) string { return RunnerKey(a.doc, a.caseID, a.prompt, a.model, a.params) }
	k0 := key(base)
	if k0 != key(base) {
		t.Fatal("RunnerKey is not deterministic")
	}
	if !strings.HasPrefix(k0, "runner-baseline:v1:") {
		t.Errorf("key %q", k0)
	}
	changes := map[string]func(a *args){
		"document":          func(a *args) { a.doc = "bb22" },
		"case":              func(a *args) { a.caseID = "c2@sha256:00" },
		"prompt version":    func(a *args) { a.prompt = "runner-instruction-file.v1:89ab+repair.v1:4567" },
		"model":             func(a *args) { a.model = "gpt-y" },
		"temperature":       func(a *args) { a.params.Temperature = f(0.2) },
		"temperature unset": func(a *args) { a.params.Temperature = nil },
		"seed":              func(a *args) { a.params.Seed = i(8) },
		"seed unset":        func(a *args) { a.params.Seed = nil },
		"max tokens":        func(a *args) { a.params.MaxTokens = 101 },
		"boundary shift":    func(a *args) { a.doc, a.caseID = "aa11c", "1@sha256:00" },
	}
	seen := map[string]string{k0: "base"}
	for name, change := range changes {
		a := base
		a.params = judge.Params{Temperature: base.params.Temperature, Seed: base.params.Seed, MaxTokens: base.params.MaxTokens}
		change(&a)
		k := key(a)
		if prev, dup := seen[k]; dup {
			t.Errorf("changing %s gives the same key as %s", name, prev)
		}
		seen[k] = name
	}
	if RunnerKey("", "", "", "", judge.Params{Seed: i(0)}) == RunnerKey("", "", "", "", judge.Params{}) {
		t.Error("seed 0 and an unset seed share a key")
	}
}

func TestSchemasMatchParsers(t *testing.T) {
	t.Parallel()
	for _, s := range []*judge.Schema{RunnerSchema(), Schema(), Schema()} {
		var v map[string]any
		if err := json.Unmarshal(s.JSON, &v); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if v["additionalProperties"] != false {
			t.Errorf("%s allows additional properties", s.Name)
		}
	}
	a := RunnerSchema()
	a.JSON[0] = 'x'
	if RunnerSchema().JSON[0] != '{' {
		t.Error("RunnerSchema hands out shared bytes")
	}
	// Every answer the schema describes must be one the parser accepts.
	if _, err := ParseRunnerOutput([]byte(kindsGoodRun)); err != nil {
		t.Error(err)
	}
}
