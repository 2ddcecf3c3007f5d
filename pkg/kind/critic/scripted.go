package critic

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// ScriptedAnswer implements kind.Scripted: setting is the correctness, slop and scope of
// every critic AC without a recorded answer ("8,2,8"). The seed's output object carries
// the judge's own verdict and quality; the fixture claims the ones its scores derive.
func (Kind) ScriptedAnswer(req, setting string) ([]byte, string, bool, error) {
	if req != string(events.KindCritic) {
		return nil, "", false, nil
	}
	parts := strings.Split(setting, ",")
	if len(parts) != 3 {
		return nil, "", true, fmt.Errorf("scores %q: want correctness,slop,scope", setting)
	}
	var s [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, "", true, fmt.Errorf("scores %q: %w", setting, err)
		}
		s[i] = n
	}
	q, v := Derive(s[0], s[1], s[2])
	data, _ := json.Marshal(map[string]any{"correctness": s[0], "slop": s[1], "scope": s[2], "verdict": v, "quality": q, "rationale": kind.ScriptedNote})
	if _, err := ParseAnswer(data); err != nil {
		return nil, "", true, err
	}
	return data, fmt.Sprintf("fixed-critic-%d-%d-%d", s[0], s[1], s[2]), true, nil
}

var _ kind.Fixtured = Kind{}

// Fixtures implements kind.Fixtured: --scripted-critic.
func (Kind) Fixtures() []kind.Fixture {
	return []kind.Fixture{{Request: string(events.KindCritic), Flag: "scripted-critic", Default: "8,2,8",
		Usage: "scripted: correctness,slop,scope of every critic AC without a recorded answer (empty to require answers)"}}
}
