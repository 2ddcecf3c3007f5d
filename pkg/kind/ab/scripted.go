package ab

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// ScriptedAnswer implements kind.Scripted: setting is the raw winner of every ab AC
// without a recorded answer (A, B or tie, the seed's fixture-winner hook), optionally
// followed by ":" and the confidence (1 when left out).
func (Kind) ScriptedAnswer(req, setting string) ([]byte, string, bool, error) {
	if req != string(events.KindAB) {
		return nil, "", false, nil
	}
	w, c, _ := strings.Cut(setting, ":")
	w = strings.ToUpper(w)
	if w == "TIE" {
		w = "tie"
	}
	if w != "A" && w != "B" && w != "tie" {
		return nil, "", true, fmt.Errorf("winner %q: want A, B or tie", setting)
	}
	conf := 1.0
	if c != "" {
		f, err := strconv.ParseFloat(c, 64)
		if err != nil {
			return nil, "", true, fmt.Errorf("confidence %q: %w", c, err)
		}
		conf = f
	}
	data, _ := json.Marshal(map[string]any{"raw_winner": w, "confidence": conf, "biggest_gap": kind.ScriptedNote})
	if _, err := ParseRawVerdict(data); err != nil {
		return nil, "", true, err
	}
	return data, "fixed-" + w, true, nil
}

var _ kind.Fixtured = Kind{}

// Fixtures implements kind.Fixtured: --scripted-winner, the seed's fixture-winner hook,
// whose name (fixed-A) names the scripted model.
func (Kind) Fixtures() []kind.Fixture {
	return []kind.Fixture{{Request: string(events.KindAB), Flag: "scripted-winner", Default: "A", Names: true,
		Usage: "scripted: raw winner for every ab AC without a recorded answer: A, B or tie; empty to require answers"}}
}
