package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// answer is a judge's answer in role terms; the test turns it into slot terms with the
// AC's own assignment, as a real blind judge's answer would be.
type answer struct {
	winner     ab.Winner
	confidence float64
	raw        string // when set, sent verbatim (schema violations)
}

// runScripted runs one batch (ACs keyed by id, in order) with recorded answers and
// returns its results.
func runScripted(t *testing.T, ids []string, answers map[string]answer, missing map[string]bool) (*Env, resultsT) {
	t.Helper()
	env := NewEnv(t)
	rec := map[string]any{}
	for id, a := range answers {
		if a.raw != "" {
			rec[id] = json.RawMessage(a.raw)
			continue
		}
		slot := ab.Assign(id, 0).Label(a.winner)
		rec[id] = map[string]any{"raw_winner": slot, "confidence": a.confidence, "biggest_gap": "gap for " + id}
	}
	env.Start(Scripted(t, scripted.Options{}, rec), "judge-1", bus.Services...)
	files := map[string]string{}
	var sb strings.Builder
	sb.WriteString("version: 1\nname: routing\nthreshold: 0.75\nacs:\n")
	for i, id := range ids {
		files[fmt.Sprintf("o/%d.md", i)] = fmt.Sprintf("ours %d\n", i)
		files[fmt.Sprintf("r/%d.md", i)] = fmt.Sprintf("reference %d\n", i)
		ours := fmt.Sprintf("o/%d.md", i)
		if missing[id] {
			ours = "absent.md"
		}
		fmt.Fprintf(&sb, "  - id: %s\n    criterion: c\n    ours: %s\n    reference: r/%d.md\n", id, ours, i)
	}
	files["batch.yaml"] = sb.String()
	res := env.Wait(env.Submit(WriteBatch(t, files), "team-a"), 30*time.Second)
	return env, resultsT{res.Summary.ExitCode, res.Rows, res.Manifest}
}

type resultsT struct {
	exit     int
	rows     []rowT
	manifest *ab.Manifest
}

type rowT = client.Row

// TestTagRoutingTable pins every row of the seed's tag-routing table through the whole
// flow: the answer is given in slot terms, un-shuffled by the aggregator and routed.
func TestTagRoutingTable(t *testing.T) {
	cases := []struct {
		id          string
		ans         answer
		tag, impact string // empty tag: no suggestion
	}{
		{"AC-block", answer{ab.WinnerReference, 0.95, ""}, "block", "high"},
		{"AC-block-edge", answer{ab.WinnerReference, 0.9, ""}, "block", "high"},
		{"AC-fix", answer{ab.WinnerReference, 0.8, ""}, "fix", "medium"},
		{"AC-fix-edge", answer{ab.WinnerReference, 0.75, ""}, "fix", "medium"},
		{"AC-polish-ref", answer{ab.WinnerReference, 0.74, ""}, "polish", "medium"},
		{"AC-polish-tie", answer{ab.WinnerTie, 0.95, ""}, "polish", "medium"},
		{"AC-polish-ours", answer{ab.WinnerOurs, 0.6, ""}, "polish", "low"},
		{"AC-clean", answer{ab.WinnerOurs, 0.9, ""}, "", ""},
		{"AC-clean-edge", answer{ab.WinnerOurs, 0.75, ""}, "", ""},
	}
	var ids []string
	answers := map[string]answer{}
	for _, c := range cases {
		ids = append(ids, c.id)
		answers[c.id] = c.ans
	}
	_, res := runScripted(t, ids, answers, nil)
	rows := map[string]rowT{}
	for _, r := range res.rows {
		rows[r.ACID] = r
	}
	suggested := map[string]ab.Suggestion{}
	for _, s := range res.manifest.Suggestions {
		suggested[s.Files[0]] = s
	}
	for _, c := range cases {
		r := rows[c.id]
		if r.Status != "compared" || r.Winner != string(c.ans.winner) {
			t.Errorf("%s: row %+v, want compared winner %s", c.id, r, c.ans.winner)
		}
		if r.Tag != c.tag || r.Impact != c.impact {
			t.Errorf("%s: tag %q impact %q, want %q %q", c.id, r.Tag, r.Impact, c.tag, c.impact)
		}
		s, ok := suggested[c.id]
		if ok != (c.tag != "") {
			t.Errorf("%s: suggestion present %v, want %v", c.id, ok, c.tag != "")
		}
		if ok && (string(s.Tag) != c.tag || string(s.Impact) != c.impact || s.Category != "reference-gap" || s.Status != "pending") {
			t.Errorf("%s: manifest suggestion %+v", c.id, s)
		}
	}
	if res.exit != 1 {
		t.Fatalf("exit %d, want 1 (findings)", res.exit)
	}
}

// TestExitCodeTable pins the seed's exit codes end to end.
func TestExitCodeTable(t *testing.T) {
	clean := answer{ab.WinnerOurs, 0.9, ""}
	cases := []struct {
		name    string
		answers map[string]answer
		missing map[string]bool
		want    int
	}{
		{"all clean", map[string]answer{"AC-1": clean, "AC-2": clean}, nil, 0},
		{"a finding", map[string]answer{"AC-1": clean, "AC-2": {ab.WinnerReference, 0.8, ""}}, nil, 1},
		{"schema violation", map[string]answer{"AC-1": clean, "AC-2": {raw: `{"raw_winner":"A","confidence":1.5,"biggest_gap":"x"}`}}, nil, 3},
		{"every AC blocked", map[string]answer{}, map[string]bool{"AC-1": true, "AC-2": true}, 4},
		{"some blocked, rest clean", map[string]answer{"AC-1": clean}, map[string]bool{"AC-2": true}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, res := runScripted(t, []string{"AC-1", "AC-2"}, c.answers, c.missing)
			if res.exit != c.want {
				t.Fatalf("exit %d, want %d; rows %+v", res.exit, c.want, res.rows)
			}
			if len(res.manifest.Comparisons) != 2 {
				t.Fatalf("manifest has %d comparisons, want 2 (blocked ones included)", len(res.manifest.Comparisons))
			}
		})
	}
}
