package equivalence

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func answer(verdict string, o, c int) Answer {
	delta := ""
	if verdict != VerdictEquivalent {
		delta = "some delta"
	}
	return Answer{Verdict: verdict, BehaviourDelta: delta, EfficiencySignal: EfficiencySignal{o, c, "notes"}}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	eq := OK("e", answer(VerdictEquivalent, 3, 3))
	div := OK("d", answer(VerdictDiverged, 3, 4))
	reg := OK("r", answer(VerdictRegressed, 4, 2))
	tests := []struct {
		name  string
		cases []CaseResult
		want  Summary
	}{
		{"all equivalent", []CaseResult{eq, eq}, Summary{Pass: true, Equivalents: 2}},
		{"divergences still pass", []CaseResult{eq, div, div}, Summary{Pass: true, Divergences: 2, Equivalents: 1}},
		{"one regression fails", []CaseResult{eq, div, reg}, Summary{Regressions: 1, Divergences: 1, Equivalents: 1}},
		{"only regressions", []CaseResult{reg, reg}, Summary{Regressions: 2}},
		{"schema violation never passes", []CaseResult{eq, SchemaViolation("x", "bad")}, Summary{Equivalents: 1, SchemaViolations: 1}},
		{"blocked never passes", []CaseResult{eq, div, Blocked("x", "runner unavailable")}, Summary{Divergences: 1, Equivalents: 1, Blocked: 1}},
		{"no cases is no evidence", nil, Summary{}},
		{"ok row with unknown verdict is re-validated", []CaseResult{eq, {CaseID: "x", Status: StatusOK, Verdict: "fine", EfficiencySignal: EfficiencySignal{3, 3, "n"}}}, Summary{Equivalents: 1, SchemaViolations: 1}},
		{"ok row regression without delta", []CaseResult{eq, {CaseID: "x", Status: StatusOK, Verdict: VerdictRegressed, EfficiencySignal: EfficiencySignal{3, 3, "n"}}}, Summary{Equivalents: 1, SchemaViolations: 1}},
		{"ok row with directness 0", []CaseResult{{CaseID: "x", Status: StatusOK, Verdict: VerdictEquivalent, EfficiencySignal: EfficiencySignal{0, 3, "n"}}}, Summary{SchemaViolations: 1}},
		{"unknown status", []CaseResult{eq, {CaseID: "x", Status: "pending", Verdict: VerdictEquivalent, EfficiencySignal: EfficiencySignal{3, 3, "n"}}}, Summary{Equivalents: 1, SchemaViolations: 1}},
		{"blocked row with a verdict still counts as blocked", []CaseResult{{CaseID: "x", Status: StatusBlocked, Verdict: VerdictEquivalent}}, Summary{Blocked: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.cases); got != tc.want {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCoverage(t *testing.T) {
	t.Parallel()
	all := []TransferCase{{"1", "a", TagHappy}, {"2", "b", TagEdge}, {"3", "c", TagAdversarial}, {"4", "d", TagComposition}}
	tests := []struct {
		name string
		set  []TransferCase
		min  int
		want CoverageReport
	}{
		{"all four tags, enough cases", all, 0, CoverageReport{Complete: true, MissingTags: []string{}, Cases: 4, MinCases: DefaultMinCases}},
		{"a missing tag", all[:3], 3, CoverageReport{MissingTags: []string{TagComposition}, Cases: 3, MinCases: 3}},
		{"too few cases", all, 6, CoverageReport{MissingTags: []string{}, Cases: 4, MinCases: 6}},
		{"only happy", []TransferCase{{"1", "a", TagHappy}, {"2", "b", TagHappy}}, 1, CoverageReport{MissingTags: []string{TagEdge, TagAdversarial, TagComposition}, Cases: 2, MinCases: 1}},
		{"empty set", nil, 0, CoverageReport{MissingTags: []string{TagHappy, TagEdge, TagAdversarial, TagComposition}, MinCases: DefaultMinCases}},
		{"unknown tags reported, not counted", append([]TransferCase{{"5", "e", "Edge"}, {"6", "f", ""}, {"7", "g", "Edge"}}, all[:1]...), 1,
			CoverageReport{MissingTags: []string{TagEdge, TagAdversarial, TagComposition}, UnknownTags: []string{"", "Edge"}, Cases: 4, MinCases: 1}},
		{"repeated id adds no breadth", append(all, TransferCase{"4", "d", TagComposition}), 5, CoverageReport{MissingTags: []string{}, Cases: 4, MinCases: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Coverage(tc.set, tc.min); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Coverage = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEfficiency(t *testing.T) {
	t.Parallel()
	got := Efficiency([]CaseResult{
		OK("a", answer(VerdictEquivalent, 3, 5)),
		OK("b", answer(VerdictRegressed, 4, 2)),
		OK("c", answer(VerdictDiverged, 2, 4)),
		OK("d", answer(VerdictEquivalent, 3, 3)),
		Blocked("e", "x"),
		{CaseID: "f", Status: StatusOK, Verdict: VerdictEquivalent, EfficiencySignal: EfficiencySignal{5, 6, "n"}},
	})
	want := EfficiencySummary{Cases: 4, MeanOriginalDirectness: 3, MeanCandidateDirectness: 3.5, CandidateMoreDirect: 2, CandidateLessDirect: 1}
	if got != want {
		t.Errorf("Efficiency = %+v, want %+v", got, want)
	}
	if got := Efficiency(nil); got != (EfficiencySummary{}) {
		t.Errorf("Efficiency(nil) = %+v", got)
	}
	if got := Efficiency([]CaseResult{OK("a", answer(VerdictEquivalent, 1, 2)), OK("b", answer(VerdictEquivalent, 1, 2)), OK("c", answer(VerdictEquivalent, 2, 3))}); got.MeanOriginalDirectness != 1.33 || got.MeanCandidateDirectness != 2.33 {
		t.Errorf("means not rounded to two decimals: %+v", got)
	}
}

func TestNewReport(t *testing.T) {
	t.Parallel()
	set := []TransferCase{{"c1", "a", TagHappy}, {"c2", "b", TagEdge}, {"c3", "c", TagAdversarial}, {"c1", "a", TagHappy}}
	results := []CaseResult{
		OK("c2", answer(VerdictDiverged, 3, 4)),
		OK("c1", answer(VerdictEquivalent, 3, 3)),
		OK("zz", answer(VerdictEquivalent, 3, 3)),
	}
	r := NewReport(set, results, 0)
	var ids, statuses []string
	for _, c := range r.Cases {
		ids = append(ids, c.CaseID)
		statuses = append(statuses, string(c.Status))
	}
	if want := []string{"c1", "c2", "c3", "zz"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
	if want := []string{string(StatusOK), string(StatusOK), string(StatusBlocked), string(StatusSchemaViolation)}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	if want := (Summary{Divergences: 1, Equivalents: 1, SchemaViolations: 1, Blocked: 1}); r.Summary != want {
		t.Errorf("summary %+v, want %+v", r.Summary, want)
	}
	if r.Coverage.Complete || !reflect.DeepEqual(r.Coverage.MissingTags, []string{TagComposition}) {
		t.Errorf("coverage %+v", r.Coverage)
	}

	dup := NewReport(set[:1], []CaseResult{OK("c1", answer(VerdictEquivalent, 3, 3)), OK("c1", answer(VerdictRegressed, 3, 3))}, 1)
	if len(dup.Cases) != 1 || dup.Cases[0].Status != StatusSchemaViolation || dup.Summary.Pass {
		t.Errorf("two results for one case: %+v", dup)
	}

	ok := NewReport(set[:2], results[:2], 2)
	if !ok.Summary.Pass {
		t.Errorf("all cases judged, no regression: %+v", ok.Summary)
	}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	set := []TransferCase{{"c1", "a", TagHappy}, {"c2", "b", TagEdge}}
	r := NewReport(set, []CaseResult{OK("c1", answer(VerdictRegressed, 4, 3))}, 0)
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		`"cases":[{"case_id":"c1","verdict":"candidate-regressed","behaviour_delta":"some delta","efficiency_signal":{"original_directness":4,"candidate_directness":3,"interpretation_notes":"notes"},"status":"ok"}`,
		`{"case_id":"c2","verdict":"","behaviour_delta":"","status":"blocked","error":"no result recorded for this case"}`,
		`"summary":{"pass":false,"regressions":1,"divergences":0,"equivalents":0,"schema_violations":0,"blocked":1}`,
		`"coverage":{"complete":false,"missing_tags":["adversarial","composition"],"cases":2,"min_cases":4}`,
		`"efficiency":{"cases":1,"mean_original_directness":4,"mean_candidate_directness":3,"candidate_more_direct":0,"candidate_less_direct":1}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report JSON lacks %s\n%s", want, s)
		}
	}
}

func TestCacheID(t *testing.T) {
	a := TransferCase{ID: "c1", Input: "x", Tag: TagHappy}
	b := a
	b.Input = "y"
	c := a
	c.Tag = TagEdge
	if a.CacheID() == b.CacheID() {
		t.Error("editing the input must change the cache id")
	}
	if a.CacheID() != c.CacheID() {
		t.Error("the tag does not change a run and must not change the cache id")
	}
	if !strings.HasPrefix(a.CacheID(), "c1@sha256:") {
		t.Errorf("CacheID = %q", a.CacheID())
	}
}
