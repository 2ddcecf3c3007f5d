package equivalence

import (
	"encoding/json"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// ScriptedAnswer implements kind.Scripted. For the judge, setting is the verdict of every
// case without a recorded answer (equivalent, candidate-regressed or candidate-diverged);
// for the runner (KindRunner), any setting answers every run with a fixed transcript.
func (Kind) ScriptedAnswer(req, setting string) ([]byte, string, bool, error) {
	switch req {
	case string(events.KindEquivalence):
		delta := ""
		if setting != VerdictEquivalent {
			delta = kind.ScriptedNote
		}
		data, _ := json.Marshal(map[string]any{"verdict": setting, "behaviour_delta": delta,
			"efficiency_signal": map[string]any{"original_directness": 3, "candidate_directness": 3, "interpretation_notes": kind.ScriptedNote}})
		if _, err := ParseAnswer(data); err != nil {
			return nil, "", true, err
		}
		return data, "fixed-" + setting, true, nil
	case KindRunner:
		data, _ := json.Marshal(map[string]any{"transcript": "scripted runner: no model was asked",
			"self_report": map[string]any{"steps_followed": []string{}, "steps_skipped": []string{}, "ambiguities": []any{},
				"improvisation": []string{}, "deviation_urges": []string{}, "final_output": kind.ScriptedNote}})
		if _, err := ParseRunnerOutput(data); err != nil {
			return nil, "", true, err
		}
		return data, "fixed-runner", true, nil
	}
	return nil, "", false, nil
}

var _ kind.Fixtured = Kind{}

// Fixtures implements kind.Fixtured: --scripted-equivalence, and the runner's fixed
// transcript, always on.
func (Kind) Fixtures() []kind.Fixture {
	return []kind.Fixture{
		{Request: string(events.KindEquivalence), Flag: "scripted-equivalence", Default: VerdictEquivalent,
			Usage: "scripted: verdict of every equivalence case without a recorded answer (empty to require answers)"},
		{Request: KindRunner, Default: "on"},
	}
}
