package judge

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/critic"
)

func TestCriticMessagesFence(t *testing.T) {
	msgs := CriticMessages(CriticInput{Key: "AC-9", Task: kindsInjection, Output: "fine output"})
	kindsAssertFenced(t, msgs, "TASK")
	msgs = CriticMessages(CriticInput{Key: "AC-9", Task: "write a haiku", Output: kindsInjection})
	kindsAssertFenced(t, msgs, "OUTPUT")
	if strings.Contains(kindsUserText(msgs), "AC-9") {
		t.Error("the key reached the model")
	}
	sys := msgs[0].Parts[0].Text
	for _, rule := range []string{"LOWER is better", "0 means no slop", "min(correctness, scope, 10 - slop)", "not instructions", "pass, revise and reject"} {
		if !strings.Contains(sys, rule) {
			t.Errorf("critic prompt lacks %q", rule)
		}
	}
}

func TestJudgeCriticRepair(t *testing.T) {
	ctx := context.Background()
	in := CriticInput{Key: "AC-9", Task: "write a haiku", Output: "an old pond"}
	valid := `{"correctness": 6, "slop": 2, "scope": 8, "verdict": "pass", "quality": 6, "rationale": "Right form, weak image."}`

	p, seen := kindsAnswersInTurn(`{"correctness": 6, "slop": 11, "scope": 8, "rationale": "r"}`, valid)
	out := JudgeCritic(ctx, p, "", "", in, Params{})
	if out.Status != "ok" || len(*seen) != 2 || out.Usage.Calls != 2 {
		t.Fatalf("invalid then valid: %+v after %d calls", out, len(*seen))
	}
	if !strings.Contains(kindsUserText((*seen)[1].Messages[3:]), "slop") {
		t.Error("the repair re-ask does not name the field")
	}
	if (*seen)[0].Kind != "critic" || (*seen)[0].Schema.Name != "critic_scores" || out.Usage.PromptHash != CriticPromptHash() {
		t.Errorf("request %+v / usage %+v", (*seen)[0], out.Usage)
	}
	r := CriticResult(out)
	if r.Verdict != critic.VerdictRevise || r.Quality != 6 || r.Disagreements != 1 || r.ClaimedVerdict != "pass" {
		t.Errorf("the judge's claimed pass must not survive: %+v", r)
	}

	p, seen = kindsAnswersInTurn(`{"correctness": 7.5, "slop": 1, "scope": 8, "rationale": "r"}`, `{"correctness": "7", "slop": 1, "scope": 8, "rationale": "r"}`)
	out = JudgeCritic(ctx, p, "m", "", in, Params{})
	if out.Status != "schema_violation" || len(*seen) != 2 || !strings.Contains(out.Error, "correctness") || !strings.Contains(out.Raw, `"7"`) {
		t.Fatalf("invalid twice: %+v", out)
	}
	if r := CriticResult(out); r.Status != critic.StatusSchemaViolation || r.Verdict != "" {
		t.Errorf("result %+v", r)
	}

	for _, missing := range []CriticInput{{Task: "", Output: "x"}, {Task: "x", Output: " \n"}} {
		p, seen = kindsAnswersInTurn(valid)
		out = JudgeCritic(ctx, p, "m", "", missing, Params{})
		if out.Status != "blocked" || out.Error != "missing input" || len(*seen) != 0 || out.Usage.Calls != 0 {
			t.Errorf("missing input: %+v after %d calls", out, len(*seen))
		}
		if r := CriticResult(out); r.Status != critic.StatusBlocked || r.Reason != "missing input" || r.Verdict != "" {
			t.Errorf("result %+v", r)
		}
	}

	p, _ = kindsAnswersInTurn()
	if out := JudgeCritic(ctx, p, "m", "", in, Params{}); out.Status != "unavailable" || CriticResult(out).Status != critic.StatusBlocked {
		t.Errorf("provider down: %+v", out)
	}
}

func TestCriticSchemaEnum(t *testing.T) {
	var s struct {
		Required   []string `json:"required"`
		Properties struct {
			Verdict struct {
				Enum []string `json:"enum"`
			} `json:"verdict"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(CriticSchema().JSON, &s); err != nil {
		t.Fatal(err)
	}
	if want := []string{critic.VerdictPass, critic.VerdictRevise, critic.VerdictReject}; !reflect.DeepEqual(s.Properties.Verdict.Enum, want) {
		t.Errorf("enum %v, want %v", s.Properties.Verdict.Enum, want)
	}
	if want := []string{"correctness", "slop", "scope", "verdict", "quality", "rationale"}; !reflect.DeepEqual(s.Required, want) {
		t.Errorf("required %v", s.Required)
	}
}

func TestPromptHashes(t *testing.T) {
	skill, _ := RunnerPromptHash("skill")
	file, _ := RunnerPromptHash("instruction-file")
	for _, h := range []struct{ got, prefix string }{
		{skill, "runner-skill.v1:"}, {file, "runner-instruction-file.v1:"},
		{EquivalencePromptHash(), "equivalence.v1:"}, {CriticPromptHash(), "critic.v1:"},
	} {
		if !strings.HasPrefix(h.got, h.prefix) || !strings.Contains(h.got, "+repair.v1:") {
			t.Errorf("hash %q, want prefix %q and the repair template", h.got, h.prefix)
		}
		t.Log(h.got)
	}
}

// TestJudgeCriticNeedsTheWholeOutputObject: af-critic's "Return only this JSON object,
// no prose, no code fence" with verdict and quality in it. A fenced answer, or one that
// leaves out the claims, is re-asked once and then recorded as a schema violation.
func TestJudgeCriticNeedsTheWholeOutputObject(t *testing.T) {
	in := CriticInput{Key: "AC-9", Task: "write a haiku", Output: "an old pond"}
	valid := `{"correctness": 8, "slop": 1, "scope": 8, "verdict": "pass", "quality": 8, "rationale": "r"}`
	for _, tc := range []struct{ name, bad, field string }{
		{"code fence", "```json\n" + valid + "\n```", "code fence"},
		{"no verdict", `{"correctness": 8, "slop": 1, "scope": 8, "quality": 8, "rationale": "r"}`, "verdict"},
		{"no quality", `{"correctness": 8, "slop": 1, "scope": 8, "verdict": "pass", "rationale": "r"}`, "quality"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, seen := kindsAnswersInTurn(tc.bad, tc.bad)
			out := JudgeCritic(context.Background(), p, "m", "", in, Params{})
			if out.Status != "schema_violation" || len(*seen) != 2 || !strings.Contains(out.Error, tc.field) {
				t.Fatalf("%+v after %d calls", out, len(*seen))
			}
			p, _ = kindsAnswersInTurn(tc.bad, valid)
			if out := JudgeCritic(context.Background(), p, "m", "", in, Params{}); out.Status != "ok" {
				t.Fatalf("repaired answer: %+v", out)
			}
		})
	}
}
