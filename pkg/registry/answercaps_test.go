package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

var texts = ab.Input{Key: "AC-1", Criterion: "c", A: ab.Material{Class: "text", MediaType: "text/plain", Data: []byte("a")},
	B: ab.Material{Class: "text", MediaType: "text/plain", Data: []byte("b")}}

func transcript(text string) equivalence.Transcript {
	return equivalence.Transcript{Text: text, SelfReport: equivalence.SelfReport{
		StepsFollowed: []string{"read the input"}, StepsSkipped: []string{}, Ambiguities: []equivalence.Ambiguity{},
		Improvisation: []string{}, DeviationUrges: []string{}, FinalOutput: "done",
	}}
}

// huge is a free-text field an artifact talked the model into: 2 MB, twice what an event
// may carry.
var huge = strings.Repeat("very long ", 200_000)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestOverLongAnswersAreSchemaViolations: a free-text field over strictjson.MaxText
// characters makes the answer a schema violation naming the field, after the one
// repair re-ask, whatever the kind; what is recorded stays small enough for an event.
func TestOverLongAnswersAreSchemaViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limit := "at most 2000 characters"

	answer := `{"raw_winner": "A", "confidence": 0.9, "biggest_gap": ` + jsonString(huge) + `}`
	p, _ := judgetest.AnswersInTurn(answer, answer)
	vote := ab.Judge(ctx, p, "m", "", texts, judge.Params{})
	if vote.Status != "schema_violation" || !strings.Contains(vote.Error, "biggest_gap") || !strings.Contains(vote.Error, limit) {
		t.Errorf("ab: status %s, error %q; want a schema violation naming biggest_gap", vote.Status, vote.Error)
	}
	ev := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{vote}}, "t", "b", "AC-1", 0, "", nil)
	if data, err := events.Encode(ev); err != nil || len(data) > 16<<10 {
		t.Errorf("ab: the recorded verdict encodes to %d bytes (%v); want a small event", len(data), err)
	}

	ca := `{"correctness": 6, "slop": 2, "scope": 8, "rationale": ` + jsonString(huge) + `}`
	cp, _ := judgetest.AnswersInTurn(ca, ca)
	if out := critic.Judge(ctx, cp, "m", "", critic.Input{Key: "AC-2", Task: "t", Output: "o"}, judge.Params{}); out.Status != "schema_violation" ||
		!strings.Contains(out.Error, "rationale") || !strings.Contains(out.Error, limit) || len(out.Error) > 1000 || len(out.Raw) > 2010 {
		t.Errorf("critic: status %s, error %q; want a short schema violation naming rationale", out.Status, strictjson.Clip(out.Error))
	}

	in := equivalence.Input{Key: "AC-3/c1", CaseInput: "x", Original: transcript("a"), Candidate: transcript("b")}
	for field, answer := range map[string]string{
		"behaviour_delta": `{"verdict": "candidate-diverged", "behaviour_delta": ` + jsonString(huge) +
			`, "efficiency_signal": {"original_directness": 3, "candidate_directness": 4, "interpretation_notes": "n"}}`,
		"efficiency_signal.interpretation_notes": `{"verdict": "equivalent", "behaviour_delta": "", "efficiency_signal": ` +
			`{"original_directness": 3, "candidate_directness": 4, "interpretation_notes": ` + jsonString(huge) + `}}`,
	} {
		ep, _ := judgetest.AnswersInTurn(answer, answer)
		if out := equivalence.Judge(ctx, ep, "m", "", in, judge.Params{}); out.Status != "schema_violation" ||
			!strings.Contains(out.Error, field) || !strings.Contains(out.Error, limit) || len(out.Error) > 1000 {
			t.Errorf("equivalence: status %s, error %q; want a short schema violation naming %s", out.Status, strictjson.Clip(out.Error), field)
		}
	}
}

// TestOverLongRubricFields: the rubric verdict's evidence, notes and failed dimension
// names are held to the same limit, each reported by its path.
func TestOverLongRubricFields(t *testing.T) {
	t.Parallel()
	good := `{"iteration": 1, "feature": "f", "target": "t", "state": "s", "appearance": "light", "reference_source": "human",
  "dimensions": {"visual_fidelity": {"score": 1, "anchor": "reference", "evidence": EVIDENCE}},
  "closer_to_reference_than_prev": null, "all_pass": true, "failed_dimensions": [FAILED], "notes": NOTES}`
	build := func(evidence, failed, notes string) []byte {
		r := strings.NewReplacer("EVIDENCE", jsonString(evidence), "FAILED", failed, "NOTES", jsonString(notes))
		return []byte(r.Replace(good))
	}
	if _, err := argus.ParseVerdict(build("aligned", "", "fine")); err != nil {
		t.Fatalf("a short verdict: %v", err)
	}
	for field, data := range map[string][]byte{
		"dimensions.visual_fidelity.evidence": build(huge, "", "fine"),
		"notes":                               build("aligned", "", huge),
		"failed_dimensions[0]":                build("aligned", jsonString(huge), "fine"),
	} {
		_, err := argus.ParseVerdict(data)
		var ve *argus.VerdictError
		if !errors.As(err, &ve) || !ve.Has(field) || !strings.Contains(err.Error(), "at most 2000 characters") || len(err.Error()) > 1000 {
			t.Errorf("%s over the limit: %v; want a short violation naming it", field, strictjson.Clip(errString(err)))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestFreeTextLimitCountsCharacters: the limit is in characters, so 2000 of a
// three-byte script pass and 2001 do not.
func TestFreeTextLimitCountsCharacters(t *testing.T) {
	t.Parallel()
	at := strings.Repeat("語", strictjson.MaxText)
	if r := strictjson.TooLong(at); r != "" {
		t.Errorf("%d characters (%d bytes): %s", strictjson.MaxText, len(at), r)
	}
	if r := strictjson.TooLong(at + "x"); !strings.Contains(r, "not 2001") {
		t.Errorf("one character over: %q", r)
	}
	answer := `{"raw_winner": "A", "confidence": 0.9, "biggest_gap": ` + jsonString(at) + `}`
	p, _ := judgetest.AnswersInTurn(answer)
	if vote := ab.Judge(context.Background(), p, "m", "", texts, judge.Params{}); vote.Status != "ok" {
		t.Errorf("a gap at the limit: %s %s", vote.Status, vote.Error)
	}
}
