package judge

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/equivalence"
)

func kindsTranscript(text string) equivalence.Transcript {
	return equivalence.Transcript{Text: text, SelfReport: equivalence.SelfReport{
		StepsFollowed: []string{"read the input"}, StepsSkipped: []string{}, Ambiguities: []equivalence.Ambiguity{},
		Improvisation: []string{}, DeviationUrges: []string{}, FinalOutput: "done",
	}}
}

func TestEquivalenceMessagesFence(t *testing.T) {
	in := EquivalenceInput{Key: "AC-1/c1", CaseInput: kindsInjection, Original: kindsTranscript("orig run"), Candidate: kindsTranscript(kindsInjection)}
	msgs := EquivalenceMessages(in)
	kindsAssertFenced(t, msgs, "CASE INPUT")
	kindsAssertFenced(t, msgs, "CANDIDATE TRANSCRIPT")
	u := kindsUserText(msgs)
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
	in := EquivalenceInput{Key: "AC-1/c1", CaseInput: "x", Original: kindsTranscript("a"), Candidate: kindsTranscript("b")}
	valid := `{"verdict": "candidate-regressed", "behaviour_delta": "stopped asking for confirmation", "efficiency_signal": {"original_directness": 3, "candidate_directness": 4, "interpretation_notes": "n"}}`
	noDelta := `{"verdict": "candidate-regressed", "behaviour_delta": "", "efficiency_signal": {"original_directness": 3, "candidate_directness": 4, "interpretation_notes": "n"}}`
	zero := `{"verdict": "equivalent", "behaviour_delta": "", "efficiency_signal": {"original_directness": 0, "candidate_directness": 4, "interpretation_notes": "n"}}`

	p, seen := kindsAnswersInTurn(noDelta, valid)
	out := JudgeEquivalence(ctx, p, "", "judge-1", in, Params{})
	if out.Status != "ok" || len(*seen) != 2 || out.Usage.Calls != 2 {
		t.Fatalf("invalid then valid: %+v after %d calls", out, len(*seen))
	}
	if out.Answer.Verdict != equivalence.VerdictRegressed || out.Raw != "" || out.Error != "" {
		t.Errorf("outcome %+v", out)
	}
	if !strings.Contains(kindsUserText((*seen)[1].Messages[3:]), "behaviour_delta") {
		t.Error("the repair re-ask does not name the field")
	}
	if out.Usage.PromptHash != EquivalencePromptHash() || out.Usage.Instance != "judge-1" || out.Usage.Provider != "func" {
		t.Errorf("usage %+v", out.Usage)
	}
	if (*seen)[0].Kind != "equivalence" || (*seen)[0].Schema.Name != "equivalence_verdict" {
		t.Errorf("request %+v", (*seen)[0])
	}
	row := EquivalenceCase("c1", out)
	if row.Status != equivalence.StatusOK || row.CaseID != "c1" || equivalence.Summarize([]equivalence.CaseResult{row}).Pass {
		t.Errorf("a regression row must fail: %+v", row)
	}

	p, seen = kindsAnswersInTurn(zero, "```json\n"+zero+"\n```")
	out = JudgeEquivalence(ctx, p, "m", "", in, Params{})
	if out.Status != "schema_violation" || len(*seen) != 2 || !strings.Contains(out.Error, "original_directness") || out.Raw == "" {
		t.Fatalf("invalid twice: %+v", out)
	}
	if out.Answer != (equivalence.Answer{}) {
		t.Errorf("a violation carries an answer: %+v", out.Answer)
	}
	if row := EquivalenceCase("c1", out); row.Status != equivalence.StatusSchemaViolation || row.Error == "" {
		t.Errorf("row %+v", row)
	}

	p, _ = kindsAnswersInTurn()
	out = JudgeEquivalence(ctx, p, "m", "", in, Params{})
	if out.Status != "unavailable" || EquivalenceCase("c1", out).Status != equivalence.StatusBlocked {
		t.Errorf("provider down: %+v", out)
	}

	p, seen = kindsAnswersInTurn(valid)
	blank := in
	blank.Candidate = equivalence.Transcript{}
	out = JudgeEquivalence(ctx, p, "m", "", blank, Params{})
	if out.Status != "blocked" || len(*seen) != 0 || !strings.HasPrefix(out.Error, "missing input") {
		t.Errorf("blank transcript: %+v after %d calls", out, len(*seen))
	}
}

func TestEquivalenceSchemaEnum(t *testing.T) {
	var s struct {
		Required   []string `json:"required"`
		Properties struct {
			Verdict struct {
				Enum []string `json:"enum"`
			} `json:"verdict"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(EquivalenceSchema().JSON, &s); err != nil {
		t.Fatal(err)
	}
	if want := []string{equivalence.VerdictEquivalent, equivalence.VerdictRegressed, equivalence.VerdictDiverged}; !reflect.DeepEqual(s.Properties.Verdict.Enum, want) {
		t.Errorf("enum %v, want %v", s.Properties.Verdict.Enum, want)
	}
	if want := []string{"verdict", "behaviour_delta", "efficiency_signal"}; !reflect.DeepEqual(s.Required, want) {
		t.Errorf("required %v", s.Required)
	}
}
