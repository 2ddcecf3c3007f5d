package ab

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// AC ids whose iteration-0 assignment is known (the seed's helper): AC-7 puts ours in
// slot A, AC-1 puts the reference in slot A.
const (
	acOursA = "AC-7"
	acRefA  = "AC-1"
)

func TestAssignmentsUsed(t *testing.T) {
	t.Parallel()
	if a := Assign(acOursA, 0); a != (Assignment{A: Ours, B: Reference}) {
		t.Fatalf("Assign(%s, 0) = %s; the tests below assume A=ours", acOursA, a)
	}
	if a := Assign(acRefA, 0); a != (Assignment{A: Reference, B: Ours}) {
		t.Fatalf("Assign(%s, 0) = %s; the tests below assume A=reference", acRefA, a)
	}
}

func spec(acID string, threshold float64) events.JobSpec {
	return events.JobSpec{Kind: events.KindAB, ACID: acID, Criterion: "c", KindPart: &Spec{
		Ours:      events.Source{Name: "ours/page.html"},
		Reference: events.Source{Name: "reference/page.html"},
		Threshold: threshold,
	}}
}

func vote(model, order, raw string, conf float64) events.Vote {
	return events.Vote{
		Judge: events.JudgeInfo{Provider: "openai", Model: model, PromptHash: "v1:abc+repair.v1:def"},
		Order: order, Status: "ok", RawWinner: raw, Confidence: conf, BiggestGap: "gap from " + model + " " + order,
	}
}

// slotOf returns the raw label that means w under the AC's iteration-0 assignment.
func slotOf(acID string, w Winner) string { return Assign(acID, 0).Label(w) }

// checkRederives pins the audit invariant: the recorded raw winner under the recorded
// assignment un-shuffles to the recorded winner, in the comparison and in the event.
func checkRederives(t *testing.T, d Decision) {
	t.Helper()
	c := d.Comparison
	if got := Unshuffle(c.RawWinner, c.LabelAssignment); got != c.Winner {
		t.Errorf("Unshuffle(%q, %s) = %q but Comparison.Winner = %q", c.RawWinner, c.LabelAssignment, got, c.Winner)
	}
	if d.Decided == nil || DecidedOf(d.Decided.KindPart) == nil {
		t.Fatal("no IterationDecided.AB")
	}
	r := DecidedOf(d.Decided.KindPart)
	if r.LabelAssignment != c.LabelAssignment.String() || r.RawWinner != c.RawWinner || r.Winner != string(c.Winner) {
		t.Errorf("decided %+v disagrees with comparison %+v", r, c)
	}
	a, err := ParseAssignment(r.LabelAssignment)
	if err != nil {
		t.Fatal(err)
	}
	if got := Unshuffle(r.RawWinner, a); string(got) != r.Winner {
		t.Errorf("decided: Unshuffle(%q, %s) = %q; recorded winner %q", r.RawWinner, a, got, r.Winner)
	}
	if c.Confidence == nil || *c.Confidence != r.Confidence {
		t.Errorf("confidence: comparison %v, decided %v", c.Confidence, r.Confidence)
	}
}

// TestDeriveABSingleOrder: the raw A/B/tie answer is un-shuffled under the AC's
// assignment and routed by the seed's table, for both assignments.
func TestDeriveABSingleOrder(t *testing.T) {
	t.Parallel()
	type route struct {
		suggest     bool
		tag, impact string
	}
	rows := []struct {
		name      string
		winner    Winner
		conf      float64
		threshold float64
		want      route
	}{
		{"ours at threshold", WinnerOurs, 0.75, 0.75, route{false, "", ""}},
		{"ours above threshold", WinnerOurs, 0.92, 0.75, route{false, "", ""}},
		{"reference at 0.95", WinnerReference, 0.95, 0.75, route{true, "block", "high"}},
		{"reference at 0.9", WinnerReference, 0.9, 0.75, route{true, "block", "high"}},
		{"reference at 0.8", WinnerReference, 0.8, 0.75, route{true, "fix", "medium"}},
		{"reference at 0.5", WinnerReference, 0.5, 0.75, route{true, "polish", "medium"}},
		{"tie", WinnerTie, 0.9, 0.75, route{true, "polish", "medium"}},
		{"ours at 0.6", WinnerOurs, 0.6, 0.75, route{true, "polish", "low"}},
		{"reference at 0.95 with threshold 0.97 still blocks", WinnerReference, 0.95, 0.97, route{true, "block", "high"}},
		{"ours at 0.8 with threshold 0.85", WinnerOurs, 0.8, 0.85, route{true, "polish", "low"}},
	}
	for _, acID := range []string{acOursA, acRefA} {
		for _, row := range rows {
			t.Run(acID+"/"+row.name, func(t *testing.T) {
				raw := slotOf(acID, row.winner)
				d := Derive(spec(acID, row.threshold), 0, []events.Vote{vote("m1", "AB", raw, row.conf)})
				if d.Blocked != "" {
					t.Fatalf("Blocked: %s", d.Blocked)
				}
				c := d.Comparison
				if c.Status != StatusCompared || d.Decided.Status != events.StatusCompared {
					t.Fatalf("status %s / %s; want compared", c.Status, d.Decided.Status)
				}
				if c.Winner != row.winner || c.RawWinner != raw {
					t.Errorf("winner %q raw %q; want %q raw %q", c.Winner, c.RawWinner, row.winner, raw)
				}
				if c.LabelAssignment != Assign(acID, 0) {
					t.Errorf("LabelAssignment = %s; want %s", c.LabelAssignment, Assign(acID, 0))
				}
				if c.OursArtifact != "ours/page.html" || c.ReferenceArtifact != "reference/page.html" {
					t.Errorf("artifacts = %q, %q", c.OursArtifact, c.ReferenceArtifact)
				}
				r := DecidedOf(d.Decided.KindPart)
				got := route{r.Suggest, r.Tag, r.Impact}
				if got != row.want {
					t.Errorf("route = %+v; want %+v", got, row.want)
				}
				if r.Confidence != row.conf {
					t.Errorf("confidence = %v; want %v", r.Confidence, row.conf)
				}
				if r.BiggestGap != "gap from m1 AB" || c.BiggestGap != r.BiggestGap {
					t.Errorf("biggest gap = %q / %q", r.BiggestGap, c.BiggestGap)
				}
				if r.Consistent != nil || r.Agreement != "" {
					t.Errorf("single order recorded swap/panel data: consistent %v agreement %q", r.Consistent, r.Agreement)
				}
				if c.Tribunal == nil || c.Tribunal.Swap != nil || c.Tribunal.Panel != nil {
					t.Errorf("extras = %+v; want judge only", c.Tribunal)
				}
				if j := c.Tribunal.Judge; j == nil || j.Provider != "openai" || j.Model != "m1" || j.PromptVersion != "v1:abc+repair.v1:def" {
					t.Errorf("judge info = %+v", c.Tribunal.Judge)
				}
				if d.Decided.Kind != events.KindAB || d.Decided.ACID != acID || !d.Decided.Final || strings.Join(d.Decided.Judges, ",") != "openai/m1" {
					t.Errorf("decided = %+v", d.Decided)
				}
				checkRederives(t, d)
			})
		}
	}
}

// TestDeriveABRawLabels pins the un-shuffle itself: the same raw letter means opposite
// roles for the two ACs.
func TestDeriveABRawLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		acID, raw string
		want      Winner
	}{
		{acOursA, "A", WinnerOurs},
		{acOursA, "B", WinnerReference},
		{acOursA, "tie", WinnerTie},
		{acRefA, "A", WinnerReference},
		{acRefA, "B", WinnerOurs},
		{acRefA, "tie", WinnerTie},
		// Other spellings ("b", "TIE") never reach a vote: seed 000's raw_winner is
		// exactly A, B or tie, and ParseRawVerdict refuses the rest (verdict tests).
	}
	for _, tt := range tests {
		d := Derive(spec(tt.acID, 0.75), 0, []events.Vote{vote("m", "AB", tt.raw, 0.8)})
		if d.Comparison.Winner != tt.want {
			t.Errorf("%s raw %q: winner %q; want %q", tt.acID, tt.raw, d.Comparison.Winner, tt.want)
		}
		checkRederives(t, d)
	}
}

// TestDeriveABIterationChangesAssignment: the assignment comes from (AC, iteration), so
// the iteration passed in is the one used.
func TestDeriveABIterationChangesAssignment(t *testing.T) {
	t.Parallel()
	for it := 0; it < 6; it++ {
		a := Assign(acOursA, it)
		d := Derive(spec(acOursA, 0.75), it, []events.Vote{vote("m", "AB", "A", 0.8)})
		if d.Comparison.LabelAssignment != a || d.Comparison.Winner != Winner(a.A) {
			t.Errorf("iteration %d: assignment %s winner %s; want %s winner %s", it, d.Comparison.LabelAssignment, d.Comparison.Winner, a, a.A)
		}
		checkRederives(t, d)
	}
}

// TestDeriveABSwap: a position-swap pair keeps its winner at the lower confidence when
// both orders agree once un-shuffled, and is a tie when they do not.
func TestDeriveABSwap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		acID           string
		first, second  string // raw answers of the AB and BA calls
		c1, c2         float64
		wantWinner     Winner
		wantConfidence float64
		wantConsistent bool
		wantTag        string
	}{
		// AC-7: AB sees A=ours; BA sees A=reference.
		{"consistent ours", acOursA, "A", "B", 0.9, 0.8, WinnerOurs, 0.8, true, ""},
		{"consistent reference", acOursA, "B", "A", 0.85, 0.95, WinnerReference, 0.85, true, "fix"},
		{"consistent tie", acOursA, "tie", "tie", 0.6, 0.7, WinnerTie, 0.6, true, "polish"},
		{"inconsistent: same slot twice", acOursA, "A", "A", 0.9, 0.9, WinnerTie, 0, false, "polish"},
		{"inconsistent: one tie", acOursA, "A", "tie", 0.9, 0.9, WinnerTie, 0, false, "polish"},
		// AC-1: AB sees A=reference; BA sees A=ours.
		{"AC-1 consistent ours", acRefA, "B", "A", 0.8, 0.9, WinnerOurs, 0.8, true, ""},
		{"AC-1 consistent reference", acRefA, "A", "B", 0.99, 0.92, WinnerReference, 0.92, true, "block"},
		{"AC-1 inconsistent", acRefA, "B", "B", 0.9, 0.9, WinnerTie, 0, false, "polish"},
	}
	for _, tt := range tests {
		for _, reversed := range []bool{false, true} {
			name := tt.name
			if reversed {
				name += " (BA vote first)"
			}
			t.Run(name, func(t *testing.T) {
				votes := []events.Vote{vote("m", "AB", tt.first, tt.c1), vote("m", "BA", tt.second, tt.c2)}
				if reversed {
					votes[0], votes[1] = votes[1], votes[0]
				}
				d := Derive(spec(tt.acID, 0.75), 0, votes)
				c := d.Comparison
				if c.Winner != tt.wantWinner || *c.Confidence != tt.wantConfidence {
					t.Errorf("winner %s at %v; want %s at %v", c.Winner, *c.Confidence, tt.wantWinner, tt.wantConfidence)
				}
				r := DecidedOf(d.Decided.KindPart)
				if r.Consistent == nil || *r.Consistent != tt.wantConsistent {
					t.Errorf("Consistent = %v; want %v", r.Consistent, tt.wantConsistent)
				}
				if r.Tag != tt.wantTag {
					t.Errorf("tag = %q; want %q", r.Tag, tt.wantTag)
				}
				sw := c.Tribunal.Swap
				if sw == nil {
					t.Fatal("no SwapRecord")
				}
				a := Assign(tt.acID, 0)
				if sw.FirstAssignment != a || sw.SecondAssignment != a.Swapped() || sw.Consistent != tt.wantConsistent {
					t.Errorf("SwapRecord assignments %s / %s consistent %v", sw.FirstAssignment, sw.SecondAssignment, sw.Consistent)
				}
				if sw.First.RawWinner != tt.first || sw.First.Confidence != tt.c1 || sw.Second.RawWinner != tt.second || sw.Second.Confidence != tt.c2 {
					t.Errorf("SwapRecord answers %+v / %+v", sw.First, sw.Second)
				}
				if strings.Join(d.Decided.Judges, ",") != "openai/m" {
					t.Errorf("Judges = %q; one model judged both orders", d.Decided.Judges)
				}
				checkRederives(t, d)
			})
		}
	}
}

// TestDeriveABBAOnly: a lone BA vote is judged under the swapped assignment.
func TestDeriveABBAOnly(t *testing.T) {
	t.Parallel()
	// AC-7: BA puts the reference in slot A, so "A" means reference.
	d := Derive(spec(acOursA, 0.75), 0, []events.Vote{vote("m", "BA", "A", 0.95)})
	if d.Comparison.Winner != WinnerReference || DecidedOf(d.Decided.KindPart).Tag != "block" {
		t.Errorf("winner %s tag %s; want reference/block", d.Comparison.Winner, DecidedOf(d.Decided.KindPart).Tag)
	}
	checkRederives(t, d)
}

// TestDeriveABPanel: each model is one vote; a strict majority wins, otherwise a tie.
func TestDeriveABPanel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		acID           string
		winners        []Winner
		confs          []float64
		wantWinner     Winner
		wantAgreement  string
		wantConfidence float64
		wantTag        string
	}{
		{"2-1 for ours", acOursA, []Winner{WinnerOurs, WinnerReference, WinnerOurs}, []float64{0.9, 0.99, 0.8}, WinnerOurs, "2/3", 0.85, ""},
		{"2-1 for reference", acRefA, []Winner{WinnerReference, WinnerReference, WinnerOurs}, []float64{0.7, 0.9, 0.99}, WinnerReference, "2/3", 0.8, "fix"},
		{"3-0 for reference", acRefA, []Winner{WinnerReference, WinnerReference, WinnerReference}, []float64{0.9, 0.95, 1}, WinnerReference, "3/3", (0.9 + 0.95 + 1) / 3, "block"},
		{"1-1-1 is a tie", acOursA, []Winner{WinnerOurs, WinnerReference, WinnerTie}, []float64{0.9, 0.9, 0.6}, WinnerTie, "1/3", 0.6, "polish"},
		{"2 ties of 3", acOursA, []Winner{WinnerTie, WinnerOurs, WinnerTie}, []float64{0.5, 0.9, 0.7}, WinnerTie, "2/3", 0.6, "polish"},
		{"1-1 of 2 is a tie", acRefA, []Winner{WinnerOurs, WinnerReference}, []float64{0.9, 0.9}, WinnerTie, "0/2", 0, "polish"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var votes []events.Vote
			var models []string
			for i, w := range tt.winners {
				m := "model-" + string(rune('a'+i))
				models = append(models, "openai/"+m)
				votes = append(votes, vote(m, "AB", slotOf(tt.acID, w), tt.confs[i]))
			}
			d := Derive(spec(tt.acID, 0.75), 0, votes)
			c := d.Comparison
			r := DecidedOf(d.Decided.KindPart)
			if c.Winner != tt.wantWinner || r.Agreement != tt.wantAgreement {
				t.Errorf("winner %s agreement %q; want %s %q", c.Winner, r.Agreement, tt.wantWinner, tt.wantAgreement)
			}
			if diff := r.Confidence - tt.wantConfidence; diff > 1e-12 || diff < -1e-12 {
				t.Errorf("confidence %v; want %v", r.Confidence, tt.wantConfidence)
			}
			if r.Tag != tt.wantTag {
				t.Errorf("tag %q; want %q", r.Tag, tt.wantTag)
			}
			p := c.Tribunal.Panel
			if p == nil || p.Size != len(votes) || len(p.Votes) != len(votes) {
				t.Fatalf("panel = %+v", p)
			}
			for i, v := range p.Votes {
				if v.Judge != models[i] || v.Winner != tt.winners[i] {
					t.Errorf("panel vote %d = %+v; want %s %s", i, v, models[i], tt.winners[i])
				}
			}
			if strings.Join(d.Decided.Judges, ",") != strings.Join(models, ",") {
				t.Errorf("Judges = %q; want %q", d.Decided.Judges, models)
			}
			if j := c.Tribunal.Judge; j == nil || j.Provider != "panel" || j.Model != strings.Join(models, ",") {
				t.Errorf("judge info = %+v; want the panel", c.Tribunal.Judge)
			}
			checkRederives(t, d)
		})
	}
}

// TestDeriveABPanelWithSwap: each model's swap pair is combined first, then the
// models vote; an inconsistent pair is that model's tie vote.
func TestDeriveABPanelWithSwap(t *testing.T) {
	t.Parallel()
	// AC-7: AB: A=ours; BA: A=reference.
	votes := []events.Vote{
		vote("x", "AB", "A", 0.9), vote("x", "BA", "B", 0.8), // ours, consistent, 0.8
		vote("y", "AB", "A", 0.9), vote("y", "BA", "A", 0.9), // inconsistent: tie
		vote("z", "AB", "A", 0.7), vote("z", "BA", "B", 0.95), // ours, consistent, 0.7
	}
	d := Derive(spec(acOursA, 0.75), 0, votes)
	if d.Comparison.Winner != WinnerOurs || DecidedOf(d.Decided.KindPart).Agreement != "2/3" {
		t.Fatalf("winner %s agreement %s; want ours 2/3", d.Comparison.Winner, DecidedOf(d.Decided.KindPart).Agreement)
	}
	if got := DecidedOf(d.Decided.KindPart).Confidence; got < 0.7499 || got > 0.7501 {
		t.Errorf("confidence %v; want the mean of 0.8 and 0.7", got)
	}
	// 0.75 >= threshold 0.75: clean.
	if DecidedOf(d.Decided.KindPart).Suggest {
		t.Errorf("suggestion %s; want none", DecidedOf(d.Decided.KindPart).Tag)
	}
	if len(d.Decided.Judges) != 3 {
		t.Errorf("Judges = %q; want 3 models", d.Decided.Judges)
	}
	checkRederives(t, d)
}

// TestDeriveABUnavailable: a judge that could not answer blocks the AC, naming the
// provider and model, whatever the other votes say.
func TestDeriveABUnavailable(t *testing.T) {
	t.Parallel()
	down := events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "gpt-down"}, Order: "AB", Status: "unavailable", Error: "judge provider unavailable: 503 after 3 attempts"}
	for _, votes := range [][]events.Vote{
		{down},
		{vote("m", "AB", "A", 0.99), down},
		{down, vote("m", "AB", "A", 0.99)},
		{vote("m", "AB", "A", 0.99), vote("m", "BA", "B", 0.99), down},
	} {
		d := Derive(spec(acOursA, 0.75), 0, votes)
		if d.Blocked == "" {
			t.Fatalf("votes %+v: not blocked", votes)
		}
		for _, s := range []string{"openai/gpt-down", "503 after 3 attempts", "unavailable"} {
			if !strings.Contains(d.Blocked, s) {
				t.Errorf("Blocked = %q; want it to contain %q", d.Blocked, s)
			}
		}
		if d.Decided != nil {
			t.Errorf("a blocked AC got a decision: %+v", d.Decided)
		}
		c := d.Comparison
		if c.Status != StatusBlocked || !strings.Contains(c.BlockedReason, "503") {
			t.Errorf("comparison %s %q; want blocked with the reason", c.Status, c.BlockedReason)
		}
		if c.Winner != "" || c.Confidence != nil || c.RawWinner != "" {
			t.Errorf("blocked comparison claims a verdict: %+v", c)
		}
		if c.LabelAssignment != Assign(acOursA, 0) {
			t.Errorf("LabelAssignment = %s", c.LabelAssignment)
		}
	}
}

// TestDeriveABSchemaViolation: an answer that stayed invalid makes the decision a
// schema violation, with the raw answer and the judge kept for the audit.
func TestDeriveABSchemaViolation(t *testing.T) {
	t.Parallel()
	bad := events.Vote{
		Judge: events.JudgeInfo{Provider: "openai", Model: "gpt-x", PromptHash: "h"}, Order: "AB", Status: "schema_violation",
		Error: `ab: raw_winner "C": must be "A", "B" or "tie"`, Raw: `{"raw_winner":"C","confidence":0.9,"biggest_gap":"g"}`,
	}
	for _, votes := range [][]events.Vote{
		{bad},
		{vote("m", "AB", "A", 0.99), bad},
		{bad, vote("m", "BA", "B", 0.99)},
	} {
		d := Derive(spec(acRefA, 0.75), 0, votes)
		if d.Blocked != "" {
			t.Fatalf("schema violation blocked: %s", d.Blocked)
		}
		if d.Decided == nil || d.Decided.Status != events.StatusSchemaViolation {
			t.Fatalf("decided = %+v; want schema_violation", d.Decided)
		}
		if DecidedOf(d.Decided.KindPart) == nil || DecidedOf(d.Decided.KindPart).LabelAssignment != Assign(acRefA, 0).String() || DecidedOf(d.Decided.KindPart).Suggest || DecidedOf(d.Decided.KindPart).Winner != "" {
			t.Errorf("decided.AB = %+v; want only the label assignment", DecidedOf(d.Decided.KindPart))
		}
		c := d.Comparison
		if c.Status != StatusSchemaViolation {
			t.Errorf("comparison status %s", c.Status)
		}
		for _, s := range []string{`raw_winner "C"`, "openai/gpt-x"} {
			if !strings.Contains(c.BlockedReason, s) {
				t.Errorf("BlockedReason %q; want it to contain %q", c.BlockedReason, s)
			}
		}
		if c.Tribunal == nil || c.Tribunal.Answer != bad.Raw {
			t.Errorf("raw answer not kept: %+v", c.Tribunal)
		}
		if c.Tribunal.Judge == nil || c.Tribunal.Judge.Model != "gpt-x" {
			t.Errorf("judge not kept: %+v", c.Tribunal.Judge)
		}
		if c.Winner != "" || c.Confidence != nil {
			t.Errorf("schema violation claims a verdict: %+v", c)
		}
	}
}

// TestDeriveABUnavailableBeatsSchemaViolation: an outage is reported as such even when
// another vote was malformed.
func TestDeriveABUnavailableBeatsSchemaViolation(t *testing.T) {
	t.Parallel()
	votes := []events.Vote{
		{Judge: events.JudgeInfo{Provider: "p", Model: "bad"}, Order: "AB", Status: "schema_violation", Error: "e", Raw: "x"},
		{Judge: events.JudgeInfo{Provider: "p", Model: "down"}, Order: "AB", Status: "unavailable", Error: "timeout"},
	}
	d := Derive(spec(acOursA, 0.75), 0, votes)
	if !strings.Contains(d.Blocked, "p/down") {
		t.Errorf("Blocked = %q; want the unavailable judge named", d.Blocked)
	}
}

// TestDeriveABDeterministic: replaying the same votes re-derives the same decision.
func TestDeriveABDeterministic(t *testing.T) {
	t.Parallel()
	votes := []events.Vote{vote("a", "AB", "A", 0.9), vote("b", "AB", "B", 0.8), vote("c", "AB", "A", 0.7)}
	d1 := Derive(spec(acRefA, 0.75), 0, votes)
	d2 := Derive(spec(acRefA, 0.75), 0, append([]events.Vote(nil), votes...))
	if *DecidedOf(d1.Decided.KindPart) != *DecidedOf(d2.Decided.KindPart) || d1.Comparison.Winner != d2.Comparison.Winner || *d1.Comparison.Confidence != *d2.Comparison.Confidence {
		t.Errorf("replay differs: %+v vs %+v", DecidedOf(d1.Decided.KindPart), DecidedOf(d2.Decided.KindPart))
	}
}

func TestPair(t *testing.T) {
	t.Parallel()
	if p := PairOf(events.JobSpec{}); p != (Pair{}) {
		t.Errorf("Pair of a spec without ab = %+v", p)
	}
	if p := PairOf(spec("AC-1", 0.5)); p.Ours != "ours/page.html" || p.Reference != "reference/page.html" {
		t.Errorf("Pair = %+v", p)
	}
}
