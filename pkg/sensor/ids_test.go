package sensor_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// TestProbeIDsAreNotLabels pins the sensor contract's rule "truncate any text label >
// 256 chars" together with a11y_assert.py's ID_KEYS: ids are not text labels, so a long
// id the a11y contract names survives the probe's bound and the a11y gate finds it, while
// the labels beside it are still cut.
func TestProbeIDsAreNotLabels(t *testing.T) {
	t.Parallel()
	longID := "row.item." + strings.Repeat("0123456789", 40) // 409 runes
	huge := strings.Repeat("y", sensor.MaxID+50)
	label := strings.Repeat("l", 400)
	for _, key := range []string{"id", "identifier", "accessibilityIdentifier", "testId", "testid", "data-testid", "dataTestid"} {
		t.Run(key, func(t *testing.T) {
			raw, _ := json.Marshal(map[string]any{"children": []any{
				map[string]any{key: longID, "name": label, "label": longID},
				map[string]any{key: huge},
				map[string]string{key: longID, "name": label},
			}})
			out, err := sensor.TruncateJSON(raw, sensor.MaxLabel)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := argus.HarvestIDs(out)
			if err != nil {
				t.Fatal(err)
			}
			if res := argus.CheckA11yIDs([]string{longID}, ids); len(res.Missing) != 0 {
				t.Fatalf("the contract's long id was cut: missing %q", res.Missing)
			}
			var back struct {
				Children []map[string]string `json:"children"`
			}
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			for i, c := range []map[string]string{back.Children[0], back.Children[2]} {
				if n := utf8.RuneCountInString(c["name"]); n != sensor.MaxLabel {
					t.Errorf("child %d: label kept %d runes, want %d", i, n, sensor.MaxLabel)
				}
			}
			if n := utf8.RuneCountInString(back.Children[0]["label"]); n != sensor.MaxLabel {
				t.Errorf("a long string under a label key is a label: %d runes", n)
			}
			if n := utf8.RuneCountInString(back.Children[1][key]); n != sensor.MaxID {
				t.Errorf("an id is still bounded at sensor.MaxID: %d runes", n)
			}
		})
	}
}
