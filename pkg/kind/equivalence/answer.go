package equivalence

import (
	"strconv"
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

// Validate checks an answer against the contract and returns the first violation as a
// *FieldError, in the order verdict, behaviour_delta, efficiency_signal.*. The aggregator
// calls it again on recorded answers, so a hand-edited or replayed record is held to the
// same rules as a fresh model answer.
//
// behaviour_delta must say something for candidate-regressed (the lost behaviour) and
// candidate-diverged (the difference): a failing or surfaced verdict without its evidence
// cannot be acted on. For equivalent any text, including "", is accepted, since a note
// about harmless wording differences changes nothing.
func (a Answer) Validate() error {
	switch a.Verdict {
	case VerdictEquivalent, VerdictRegressed, VerdictDiverged:
	default:
		return &FieldError{Doc: fieldDoc, Field: "verdict", Value: strconv.Quote(a.Verdict), Reason: `must be "equivalent", "candidate-regressed" or "candidate-diverged"`}
	}
	if blank(a.BehaviourDelta) {
		switch a.Verdict {
		case VerdictRegressed:
			return &FieldError{Doc: fieldDoc, Field: "behaviour_delta", Value: strconv.Quote(a.BehaviourDelta), Reason: "must name the behaviour the candidate lost when the verdict is candidate-regressed"}
		case VerdictDiverged:
			return &FieldError{Doc: fieldDoc, Field: "behaviour_delta", Value: strconv.Quote(a.BehaviourDelta), Reason: "must describe what the candidate did differently when the verdict is candidate-diverged"}
		}
	}
	for _, d := range []struct {
		field string
		v     int
	}{
		{"efficiency_signal.original_directness", a.EfficiencySignal.OriginalDirectness},
		{"efficiency_signal.candidate_directness", a.EfficiencySignal.CandidateDirectness},
	} {
		if d.v < MinDirectness || d.v > MaxDirectness {
			return &FieldError{Doc: fieldDoc, Field: d.field, Value: strconv.Itoa(d.v), Reason: "must be a whole number from 1 to 5"}
		}
	}
	if blank(a.EfficiencySignal.InterpretationNotes) {
		return &FieldError{Doc: fieldDoc, Field: "efficiency_signal.interpretation_notes", Value: strconv.Quote(a.EfficiencySignal.InterpretationNotes), Reason: "must give the evidence behind the two directness scores"}
	}
	for _, f := range []struct{ field, text string }{
		{"behaviour_delta", a.BehaviourDelta},
		{"efficiency_signal.interpretation_notes", a.EfficiencySignal.InterpretationNotes},
	} {
		if reason := tooLong(f.text); reason != "" {
			return &FieldError{Doc: fieldDoc, Field: f.field, Value: strconv.Quote(clip(f.text)), Reason: reason}
		}
	}
	return nil
}

var (
	answerFields = []string{"verdict", "behaviour_delta", "efficiency_signal"}
	signalFields = []string{"original_directness", "candidate_directness", "interpretation_notes"}
	// answerHints explain keys a drifting model is likely to send, so the repair re-ask
	// and the operator see the fix rather than just "unknown field".
	answerHints = map[string]string{
		"case_id":              "unknown field (tribunal attaches the case id; the judge answers one case without it)",
		"behavior_delta":       "unknown field (the contract spells it behaviour_delta)",
		"summary":              "unknown field (the summary is derived by tribunal, never answered by the judge)",
		"pass":                 "unknown field (pass is derived by tribunal, never answered by the judge)",
		"original_directness":  "unknown field (directness belongs inside efficiency_signal)",
		"candidate_directness": "unknown field (directness belongs inside efficiency_signal)",
	}
)

// ParseAnswer parses and validates the text an equivalence judge returned for one case.
//
// Accepted: exactly one JSON object with the keys verdict, behaviour_delta and
// efficiency_signal (itself exactly original_directness, candidate_directness and
// interpretation_notes), optionally wrapped in one ``` or ```json fence. Rejected, each as
// a *FieldError naming the field: unknown or duplicate keys at any level, a missing key,
// null, a string where a number belongs, a directness that is not a whole number from 1
// to 5 (0, 6, 3.5, 3.0), an unknown verdict, an empty behaviour_delta on a regression or
// divergence. Text that is not one JSON object wraps ErrSyntax.
//
// When decoding succeeds but Validate fails, the decoded answer is returned with the
// error so the caller can record what the judge claimed; it must never be used as a
// verdict.
func ParseAnswer(data []byte) (Answer, error) {
	o, err := decodeTop(data, answerFields, answerHints)
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	if a.Verdict, err = o.str("verdict"); err != nil {
		return Answer{}, err
	}
	if a.BehaviourDelta, err = o.str("behaviour_delta"); err != nil {
		return Answer{}, err
	}
	sig, err := o.obj("efficiency_signal")
	if err != nil {
		return Answer{}, err
	}
	if err := sig.only(signalFields, nil); err != nil {
		return Answer{}, err
	}
	if a.EfficiencySignal.OriginalDirectness, err = sig.whole("original_directness"); err != nil {
		return Answer{}, err
	}
	if a.EfficiencySignal.CandidateDirectness, err = sig.whole("candidate_directness"); err != nil {
		return Answer{}, err
	}
	if a.EfficiencySignal.InterpretationNotes, err = sig.str("interpretation_notes"); err != nil {
		return Answer{}, err
	}
	if err := a.Validate(); err != nil {
		return a, err
	}
	return a, nil
}
