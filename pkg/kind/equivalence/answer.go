package equivalence

import (
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// The three verdicts a judge may give one case. The names are the seed's contract and are
// matched exactly: the structured-output enum pins their spelling, so another spelling
// means the model ignored the schema.
const (
	// VerdictEquivalent: the candidate run did everything the original run did; any
	// difference had no behavioural consequence.
	VerdictEquivalent = "equivalent"
	// VerdictRegressed: something the original run did is missing from the candidate run.
	// It is the only verdict that fails the gate.
	VerdictRegressed = "candidate-regressed"
	// VerdictDiverged: the candidate run behaved differently but lost nothing. Surfaced for
	// the caller's judgement, never a failure by itself.
	VerdictDiverged = "candidate-diverged"
)

// Directness bounds: the efficiency scale is whole numbers from MinDirectness (the runner
// had to reinterpret heavily) to MaxDirectness (it acted at once).
const (
	MinDirectness = 1
	MaxDirectness = 5
)

// EfficiencySignal records how much interpretive work each version forced on the runner.
// It is kept on every case so that transforms claiming "same behaviour, lighter to follow"
// can show a measured gain; the gate itself never reads it.
type EfficiencySignal struct {
	OriginalDirectness  int    `json:"original_directness"`
	CandidateDirectness int    `json:"candidate_directness"`
	InterpretationNotes string `json:"interpretation_notes"`
}

// Answer is what the equivalence judge says about one case. It carries no case id: the
// judge is never told which case it is looking at, and tribunal attaches the id from the
// transfer set (see OK), so a judge cannot answer for the wrong case.
type Answer struct {
	Verdict          string           `json:"verdict"`
	BehaviourDelta   string           `json:"behaviour_delta"`
	EfficiencySignal EfficiencySignal `json:"efficiency_signal"`
}

// answerSchema is the whole contract of an equivalence answer but one rule (deltaRule),
// sent to the model as it is: exactly the keys verdict, behaviour_delta and
// efficiency_signal (itself exactly original_directness, candidate_directness and
// interpretation_notes), directness a whole number from 1 to 5 written as an integer
// (3.0 and 3e0 are refused with 3.5: the contract is a whole-number scale, and a model
// that writes a fraction or an exponent is not using it), free text capped at
// strictjson.MaxText characters.
const answerSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["verdict", "behaviour_delta", "efficiency_signal"],
  "properties": {
    "verdict": {"type": "string", "enum": ["equivalent", "candidate-regressed", "candidate-diverged"]},
    "behaviour_delta": {"type": "string", "maxLength": 2000},
    "efficiency_signal": {
      "type": "object",
      "additionalProperties": false,
      "required": ["original_directness", "candidate_directness", "interpretation_notes"],
      "properties": {
        "original_directness": {"type": "integer", "minimum": 1, "maximum": 5},
        "candidate_directness": {"type": "integer", "minimum": 1, "maximum": 5},
        "interpretation_notes": {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": "\\S"}
      }
    }
  }
}`

var answerContract = strictjson.MustCompile(strictjson.Spec{
	Doc: fieldDoc, Schema: []byte(answerSchema), Fence: strictjson.FenceTolerated, WholeLiterals: true,
	// Keys a drifting model is likely to send, so the repair re-ask and the operator see
	// the fix rather than just "unknown field".
	Hints: map[string]string{
		"case_id":              "unknown field (tribunal attaches the case id; the judge answers one case without it)",
		"behavior_delta":       "unknown field (the contract spells it behaviour_delta)",
		"summary":              "unknown field (the summary is derived by tribunal, never answered by the judge)",
		"pass":                 "unknown field (pass is derived by tribunal, never answered by the judge)",
		"original_directness":  "unknown field (directness belongs inside efficiency_signal)",
		"candidate_directness": "unknown field (directness belongs inside efficiency_signal)",
	},
	Reasons: map[string]string{
		"efficiency_signal.interpretation_notes minLength": "must give the evidence behind the two directness scores",
		"efficiency_signal.interpretation_notes pattern":   "must give the evidence behind the two directness scores",
	},
})

// AnswerSchema is the structured-output schema of an equivalence answer, as sent to the
// model.
func AnswerSchema() []byte { return answerContract.Sent() }

// Validate checks an answer against the contract (answerSchema, then deltaRule) and
// returns the first violation as a *FieldError. The aggregator calls it again on recorded
// answers, so a hand-edited or replayed record is held to the same rules as a fresh
// model answer.
func (a Answer) Validate() error {
	if err := answerContract.Validate(a); err != nil {
		return strictjson.First(err)
	}
	return a.deltaRule()
}

// deltaRule is the one rule a structured-output schema cannot carry: behaviour_delta must
// say something for candidate-regressed (the lost behaviour) and candidate-diverged (the
// difference), since a failing or surfaced verdict without its evidence cannot be acted
// on. For equivalent any text, including "", is accepted: a note about harmless wording
// differences changes nothing.
func (a Answer) deltaRule() error {
	if !blank(a.BehaviourDelta) {
		return nil
	}
	switch a.Verdict {
	case VerdictRegressed:
		return &FieldError{Doc: fieldDoc, Field: "behaviour_delta", Value: strconv.Quote(a.BehaviourDelta), Reason: "must name the behaviour the candidate lost when the verdict is candidate-regressed"}
	case VerdictDiverged:
		return &FieldError{Doc: fieldDoc, Field: "behaviour_delta", Value: strconv.Quote(a.BehaviourDelta), Reason: "must describe what the candidate did differently when the verdict is candidate-diverged"}
	}
	return nil
}

// ParseAnswer parses and validates the text an equivalence judge returned for one case:
// exactly one JSON object, optionally wrapped in one ``` or ```json fence, held to
// answerSchema and deltaRule. Rejected, each as a *FieldError naming the field: unknown
// or duplicate keys at any level, a missing key, null, a string where a number belongs, a
// directness that is not a whole number from 1 to 5 (0, 6, 3.5, 3.0), an unknown verdict,
// an empty behaviour_delta on a regression or divergence. Text that is not one JSON
// object wraps strictjson.ErrNotObject.
//
// When only a value is wrong, the decoded answer is returned with the error so the
// caller can record what the judge claimed; it must never be used as a verdict.
func ParseAnswer(data []byte) (Answer, error) {
	var a Answer
	if err := answerContract.Decode(data, &a); err != nil {
		return a, strictjson.First(err)
	}
	return a, a.deltaRule()
}
