package critic

import (
	"context"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

func TestCriticMessagesFence(t *testing.T) {
	t.Parallel()
	msgs := Messages(Input{Key: "AC-9", Task: judgetest.Injection, Output: "fine output"})
	judgetest.AssertFenced(t, msgs, "TASK")
	msgs = Messages(Input{Key: "AC-9", Task: "write a haiku", Output: judgetest.Injection})
	judgetest.AssertFenced(t, msgs, "OUTPUT")
	if strings.Contains(judgetest.UserText(msgs), "AC-9") {
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
	t.Parallel()
	ctx := context.Background()
	in := Input{Key: "AC-9", Task: "write a haiku", Output: "an old pond"}
	valid := `{"correctness": 6, "slop": 2, "scope": 8, "verdict": "pass", "quality": 6, "rationale": "Right form, weak image."}`

	p, seen := judgetest.AnswersInTurn(`{"correctness": 6, "slop": 11, "scope": 8, "rationale": "r"}`, valid)
	out := Judge(ctx, p, "", "", in, judge.Params{})
	if out.Status != "ok" || len(*seen) != 2 || out.Usage.Calls != 2 {
		t.Fatalf("invalid then valid: %+v after %d calls", out, len(*seen))
	}
	if !strings.Contains(judgetest.UserText((*seen)[1].Messages[3:]), "slop") {
		t.Error("the repair re-ask does not name the field")
	}
	if (*seen)[0].Kind != "critic" || (*seen)[0].Schema.Name != "critic_scores" || out.Usage.PromptHash != PromptHash() {
		t.Errorf("request %+v / usage %+v", (*seen)[0], out.Usage)
	}
	r := CriticResult(out)
	if r.Verdict != VerdictRevise || r.Quality != 6 || r.Disagreements != 1 || r.ClaimedVerdict != "pass" {
		t.Errorf("the judge's claimed pass must not survive: %+v", r)
	}

	p, seen = judgetest.AnswersInTurn(`{"correctness": 7.5, "slop": 1, "scope": 8, "rationale": "r"}`, `{"correctness": "7", "slop": 1, "scope": 8, "rationale": "r"}`)
	out = Judge(ctx, p, "m", "", in, judge.Params{})
	if out.Status != "schema_violation" || len(*seen) != 2 || !strings.Contains(out.Error, "correctness") || !strings.Contains(out.Raw, `"7"`) {
		t.Fatalf("invalid twice: %+v", out)
	}
	if r := CriticResult(out); r.Status != StatusSchemaViolation || r.Verdict != "" {
		t.Errorf("result %+v", r)
	}

	for _, missing := range []Input{{Task: "", Output: "x"}, {Task: "x", Output: " \n"}} {
		p, seen = judgetest.AnswersInTurn(valid)
		out = Judge(ctx, p, "m", "", missing, judge.Params{})
		if out.Status != "blocked" || out.Error != "missing input" || len(*seen) != 0 || out.Usage.Calls != 0 {
			t.Errorf("missing input: %+v after %d calls", out, len(*seen))
		}
		if r := CriticResult(out); r.Status != StatusBlocked || r.Reason != "missing input" || r.Verdict != "" {
			t.Errorf("result %+v", r)
		}
	}

	p, _ = judgetest.AnswersInTurn()
	if out := Judge(ctx, p, "m", "", in, judge.Params{}); out.Status != "unavailable" || CriticResult(out).Status != StatusBlocked {
		t.Errorf("provider down: %+v", out)
	}
}

func TestCriticSchemaEnum(t *testing.T) {
	t.Parallel()
	judgetest.AssertSchema(t, Schema(), []string{"correctness", "slop", "scope", "verdict", "quality", "rationale"}, []string{VerdictPass, VerdictRevise, VerdictReject})
}

func TestPromptHash(t *testing.T) {
	t.Parallel()
	if h := PromptHash(); !strings.HasPrefix(h, "critic.v1:") || !strings.Contains(h, "+repair.v1:") {
		t.Errorf("hash %q, want prefix critic.v1: and the repair template", h)
	}
}

// TestJudgeCriticNeedsTheWholeOutputObject: af-critic's "Return only this JSON object,
// no prose, no code fence" with verdict and quality in it. A fenced answer, or one that
// leaves out the claims, is re-asked once and then recorded as a schema violation.
func TestJudgeCriticNeedsTheWholeOutputObject(t *testing.T) {
	t.Parallel()
	in := Input{Key: "AC-9", Task: "write a haiku", Output: "an old pond"}
	valid := `{"correctness": 8, "slop": 1, "scope": 8, "verdict": "pass", "quality": 8, "rationale": "r"}`
	for _, tc := range []struct{ name, bad, field string }{
		{"code fence", "```json\n" + valid + "\n```", "code fence"},
		{"no verdict", `{"correctness": 8, "slop": 1, "scope": 8, "quality": 8, "rationale": "r"}`, "verdict"},
		{"no quality", `{"correctness": 8, "slop": 1, "scope": 8, "verdict": "pass", "rationale": "r"}`, "quality"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, seen := judgetest.AnswersInTurn(tc.bad, tc.bad)
			out := Judge(context.Background(), p, "m", "", in, judge.Params{})
			if out.Status != "schema_violation" || len(*seen) != 2 || !strings.Contains(out.Error, tc.field) {
				t.Fatalf("%+v after %d calls", out, len(*seen))
			}
			p, _ = judgetest.AnswersInTurn(tc.bad, valid)
			if out := Judge(context.Background(), p, "m", "", in, judge.Params{}); out.Status != "ok" {
				t.Fatalf("repaired answer: %+v", out)
			}
		})
	}
}
