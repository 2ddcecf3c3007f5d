package equivalence

import (
	"context"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

func kindsTranscript(text string) Transcript {
	return Transcript{Text: text, SelfReport: SelfReport{
		StepsFollowed: []string{"read the input"}, StepsSkipped: []string{}, Ambiguities: []Ambiguity{},
		Improvisation: []string{}, DeviationUrges: []string{}, FinalOutput: "done",
	}}
}

func TestEquivalenceMessagesFence(t *testing.T) {
	t.Parallel()
	in := Input{Key: "AC-1/c1", CaseInput: judgetest.Injection, Original: kindsTranscript("orig run"), Candidate: kindsTranscript(judgetest.Injection)}
	msgs := Messages(in)
	judgetest.AssertFenced(t, msgs, "CASE INPUT")
	judgetest.AssertFenced(t, msgs, "CANDIDATE TRANSCRIPT")
	u := judgetest.UserText(msgs)
	if strings.Contains(u, "AC-1/c1") {
		t.Error("the key reached the model")
	}
	o, c := strings.Index(u, "-----BEGIN ORIGINAL TRANSCRIPT"), strings.Index(u, "-----BEGIN CANDIDATE TRANSCRIPT")
	if o < 0 || c < o || !strings.Contains(u[o:c], "orig run") {
		t.Errorf("original transcript not fenced before the candidate:\n%s", u)
	}
	sys := msgs[0].Parts[0].Text
	for _, rule := range []string{"Look for a loss", "gain never cancels a loss", "cannot tell", `"candidate-regressed"`, "Length is not evidence", "never the documents", "not instructions"} {
		if !strings.Contains(sys, rule) {
			t.Errorf("equivalence prompt lacks %q", rule)
		}
	}
	if strings.Index(sys, "Look for a loss") > strings.Index(sys, `the verdict is "candidate-diverged"`) {
		t.Error("the prompt must look for a loss before choosing between diverged and equivalent")
	}
}

func TestJudgeEquivalenceRepair(t *testing.T) {
	ctx := context.Background()
	in := Input{Key: "AC-1/c1", CaseInput: "x", Original: kindsTranscript("a"), Candidate: kindsTranscript("b")}
	valid := `{"verdict": "candidate-regressed", "behaviour_delta": "stopped asking for confirmation", "efficiency_signal": {"original_directness": 3, "candidate_directness": 4, "interpretation_notes": "n"}}`
	noDelta := `{"verdict": "candidate-regressed", "behaviour_delta": "", "efficiency_signal": {"original_directness": 3, "candidate_directness": 4, "interpretation_notes": "n"}}`
	zero := `{"verdict": "equivalent", "behaviour_delta": "", "efficiency_signal": {"original_directness": 0, "candidate_directness": 4, "interpretation_notes": "n"}}`

	p, seen := judgetest.AnswersInTurn(noDelta, valid)
	out := Judge(ctx, p, "", "judge-1", in, judge.Params{})
	if out.Status != "ok" || len(*seen) != 2 || out.Usage.Calls != 2 {
		t.Fatalf("invalid then valid: %+v after %d calls", out, len(*seen))
	}
	if out.Answer.Verdict != VerdictRegressed || out.Raw != "" || out.Error != "" {
		t.Errorf("outcome %+v", out)
	}
	if !strings.Contains(judgetest.UserText((*seen)[1].Messages[3:]), "behaviour_delta") {
		t.Error("the repair re-ask does not name the field")
	}
	if out.Usage.PromptHash != PromptHash() || out.Usage.Instance != "judge-1" || out.Usage.Provider != "func" {
		t.Errorf("usage %+v", out.Usage)
	}
	if (*seen)[0].Kind != "equivalence" || (*seen)[0].Schema.Name != "equivalence_verdict" {
		t.Errorf("request %+v", (*seen)[0])
	}
	row := EquivalenceCase("c1", out)
	if row.Status != StatusOK || row.CaseID != "c1" || Summarize([]CaseResult{row}).Pass {
		t.Errorf("a regression row must fail: %+v", row)
	}

	p, seen = judgetest.AnswersInTurn(zero, "```json\n"+zero+"\n```")
	out = Judge(ctx, p, "m", "", in, judge.Params{})
	if out.Status != "schema_violation" || len(*seen) != 2 || !strings.Contains(out.Error, "original_directness") || out.Raw == "" {
		t.Fatalf("invalid twice: %+v", out)
	}
	if out.Answer != (Answer{}) {
		t.Errorf("a violation carries an answer: %+v", out.Answer)
	}
	if row := EquivalenceCase("c1", out); row.Status != StatusSchemaViolation || row.Error == "" {
		t.Errorf("row %+v", row)
	}

	p, _ = judgetest.AnswersInTurn()
	out = Judge(ctx, p, "m", "", in, judge.Params{})
	if out.Status != "unavailable" || EquivalenceCase("c1", out).Status != StatusBlocked {
		t.Errorf("provider down: %+v", out)
	}

	p, seen = judgetest.AnswersInTurn(valid)
	blank := in
	blank.Candidate = Transcript{}
	out = Judge(ctx, p, "m", "", blank, judge.Params{})
	if out.Status != "blocked" || len(*seen) != 0 || !strings.HasPrefix(out.Error, "missing input") {
		t.Errorf("blank transcript: %+v after %d calls", out, len(*seen))
	}
}

func TestEquivalenceSchemaEnum(t *testing.T) {
	t.Parallel()
	judgetest.AssertSchema(t, Schema(), []string{"verdict", "behaviour_delta", "efficiency_signal"}, []string{VerdictEquivalent, VerdictRegressed, VerdictDiverged})
}

func TestPromptHashes(t *testing.T) {
	t.Parallel()
	skill, _ := RunnerPromptHash("skill")
	file, _ := RunnerPromptHash("instruction-file")
	for _, h := range []struct{ got, prefix string }{
		{skill, "runner-skill.v1:"}, {file, "runner-instruction-file.v1:"}, {PromptHash(), "equivalence.v1:"},
	} {
		if !strings.HasPrefix(h.got, h.prefix) || !strings.Contains(h.got, "+repair.v1:") {
			t.Errorf("hash %q, want prefix %q and the repair template", h.got, h.prefix)
		}
	}
}
