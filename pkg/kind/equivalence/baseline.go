package equivalence

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// ImportedRunner is the runner a teacher transcript handed in with the batch is
// attributed to: it was captured elsewhere, by a runner tribunal did not call.
const ImportedRunner = "import"

// ParseBaseline reads a baseline import: teacher (original) transcripts captured
// elsewhere, as one JSON object mapping case ids to the runner's answer for that case
// ({"transcript": ..., "self_report": {...}}, the shape ParseRunnerOutput accepts). Each
// transcript is checked as strictly as a runner's own answer, and each id must be a case
// of the transfer set; a case the file does not name is run as usual. The result maps
// case ids to the parsed transcripts.
func ParseBaseline(data []byte, cases []events.Case) (map[string]Transcript, error) {
	obj, err := strictjson.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("not a JSON object of transcripts by case id: %w", err)
	}
	known := map[string]bool{}
	for _, c := range cases {
		known[c.ID] = true
	}
	out := make(map[string]Transcript, len(obj.Order))
	for _, id := range obj.Order {
		if !known[id] {
			return nil, fmt.Errorf("case %q is not in the transfer set", id)
		}
		t, err := ParseRunnerOutput(obj.Values[id])
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", id, err)
		}
		out[id] = t
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no transcripts")
	}
	return out, nil
}
