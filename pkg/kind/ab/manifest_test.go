package ab

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind"
)

func conf(f float64) *float64 { return &f }

func verdict(raw string, c float64, gap string) RawVerdict {
	return RawVerdict{RawWinner: raw, Confidence: c, BiggestGap: gap}
}

func TestBuildManifestGolden(t *testing.T) {
	t.Parallel()
	p7 := Pair{Ours: "out/hero.png", Reference: "ref/hero.png"}
	comps := []Comparison{
		// Given out of order on purpose: the manifest orders by AC id.
		Compared("AC-12", Pair{Ours: "o12", Reference: "r12"}, Assign("AC-12", 1), verdict("A", 0.93, "The reference aligns the grid.")),
		Compared("AC-7", p7, Assign("AC-7", 0), verdict("A", 0.8, "Ours has tighter copy.")),
		Blocked("AC-9", Pair{Ours: "clip.webm", Reference: "ref.webm"}, Assign("AC-9", 0), "video artifacts are not supported"),
		SchemaViolation("AC-10", Pair{Ours: "o10", Reference: "r10"}, Assign("AC-10", 0), &FieldError{Doc: fieldDoc, Field: "confidence", Value: "1.5", Reason: "must be a number in [0,1]"}),
		Compared("AC-8", Pair{Ours: "o8", Reference: "r8"}, Assign("AC-8", 0), verdict("tie", 0.4, "Neither handles the empty state.")),
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("CET", 3600))
	m := BuildManifest("ab-critic-1", "cfn-ab-critic", at, 0.75, comps)

	got, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	const want = `{
  "review_id": "ab-critic-1",
  "source": "cfn-ab-critic",
  "generated_at": "2026-03-04T04:06:07.000000008Z",
  "status": "pending_review",
  "comparisons": [
    {
      "ac_id": "AC-7",
      "ours_artifact": "out/hero.png",
      "reference_artifact": "ref/hero.png",
      "label_assignment": {
        "A": "ours",
        "B": "reference"
      },
      "raw_winner": "A",
      "winner": "ours",
      "confidence": 0.8,
      "biggest_gap": "Ours has tighter copy.",
      "status": "compared"
    },
    {
      "ac_id": "AC-8",
      "ours_artifact": "o8",
      "reference_artifact": "r8",
      "label_assignment": {
        "A": "reference",
        "B": "ours"
      },
      "raw_winner": "tie",
      "winner": "tie",
      "confidence": 0.4,
      "biggest_gap": "Neither handles the empty state.",
      "status": "compared"
    },
    {
      "ac_id": "AC-9",
      "ours_artifact": "clip.webm",
      "reference_artifact": "ref.webm",
      "label_assignment": {
        "A": "reference",
        "B": "ours"
      },
      "status": "blocked",
      "blocked_reason": "video artifacts are not supported"
    },
    {
      "ac_id": "AC-10",
      "ours_artifact": "o10",
      "reference_artifact": "r10",
      "label_assignment": {
        "A": "reference",
        "B": "ours"
      },
      "status": "schema_violation",
      "blocked_reason": "ab verdict: field confidence = 1.5: must be a number in [0,1]"
    },
    {
      "ac_id": "AC-12",
      "ours_artifact": "o12",
      "reference_artifact": "r12",
      "label_assignment": {
        "A": "reference",
        "B": "ours"
      },
      "raw_winner": "A",
      "winner": "reference",
      "confidence": 0.93,
      "biggest_gap": "The reference aligns the grid.",
      "status": "compared"
    }
  ],
  "suggestions": [
    {
      "id": "S001",
      "category": "reference-gap",
      "tag": "polish",
      "one_liner": "Make AC-8 distinguishably better than its reference",
      "title": "AC-8: no winner against the reference (confidence 0.40)",
      "description": "Blind A/B comparison of AC-8: winner tie at confidence 0.40 (threshold 0.75). Biggest gap (slot A was the reference, slot B ours): Neither handles the empty state.",
      "files": [
        "AC-8"
      ],
      "impact": "medium",
      "effort": "medium",
      "suggested_approach": "Compare o8 with r8 and address the biggest gap (slot A was the reference, slot B ours): Neither handles the empty state.",
      "status": "pending"
    },
    {
      "id": "S002",
      "category": "reference-gap",
      "tag": "block",
      "one_liner": "Close the gap between AC-12 and its reference before merging",
      "title": "AC-12: reference artifact clearly better (confidence 0.93)",
      "description": "Blind A/B comparison of AC-12: winner reference at confidence 0.93 (threshold 0.75). Biggest gap (slot A was the reference, slot B ours): The reference aligns the grid.",
      "files": [
        "AC-12"
      ],
      "impact": "high",
      "effort": "medium",
      "suggested_approach": "Compare o12 with r12 and address the biggest gap (slot A was the reference, slot B ours): The reference aligns the grid.",
      "status": "pending"
    }
  ],
  "tribunal": {
    "threshold": 0.75
  }
}`
	if string(got) != want {
		t.Errorf("manifest JSON mismatch\ngot:\n%s\nwant:\n%s", got, want)
	}
	if code := kind.ExitCode(m.Outcomes()); code != kind.ExitSchemaViolation {
		t.Errorf("exit code = %d, want %d", code, kind.ExitSchemaViolation)
	}
	// The input slice is not reordered.
	if comps[0].ACID != "AC-12" {
		t.Errorf("BuildManifest reordered its input")
	}
}

func TestBuildManifestEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	m := BuildManifest("r", "s", time.Unix(0, 0), 0.75, nil)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"comparisons":[]`, `"suggestions":[]`} {
		if !strings.Contains(string(out), frag) {
			t.Errorf("%s missing from %s", frag, out)
		}
	}
	if code := kind.ExitCode(m.Outcomes()); code != kind.ExitUsage {
		t.Errorf("empty manifest exit = %d, want %d", code, kind.ExitUsage)
	}
}

func TestBuildManifestRouting(t *testing.T) {
	t.Parallel()
	a := oursFirst // A is ours, B is the reference
	tests := []struct {
		name    string
		v       RawVerdict
		wantTag Tag
		wantImp Impact
		wantOut kind.Outcome
		title   string
	}{
		{"clean", verdict("A", 0.75, "g"), "", "", kind.OutcomeClean, ""},
		{"ours below threshold", verdict("A", 0.6, "g"), TagPolish, ImpactLow, kind.OutcomeFinding, "AC-1: ours preferred, but below the threshold (0.60 < 0.75)"},
		{"reference weak", verdict("B", 0.6, "g"), TagPolish, ImpactMedium, kind.OutcomeFinding, "AC-1: reference artifact slightly preferred (confidence 0.60)"},
		{"reference fix", verdict("B", 0.8, "g"), TagFix, ImpactMedium, kind.OutcomeFinding, "AC-1: reference artifact preferred (confidence 0.80)"},
		{"reference block", verdict("B", 0.9, "g"), TagBlock, ImpactHigh, kind.OutcomeFinding, "AC-1: reference artifact clearly better (confidence 0.90)"},
		{"tie", verdict("tie", 0.95, "g"), TagPolish, ImpactMedium, kind.OutcomeFinding, "AC-1: no winner against the reference (confidence 0.95)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Compared("AC-1", Pair{Ours: "o", Reference: "r"}, a, tc.v)
			m := BuildManifest("r", "s", time.Unix(0, 0), DefaultThreshold, []Comparison{c})
			if got := m.Outcomes(); !reflect.DeepEqual(got, []kind.Outcome{tc.wantOut}) {
				t.Errorf("outcomes = %v, want %v", got, tc.wantOut)
			}
			if tc.wantTag == "" {
				if len(m.Suggestions) != 0 {
					t.Fatalf("suggestions = %+v, want none", m.Suggestions)
				}
				return
			}
			if len(m.Suggestions) != 1 {
				t.Fatalf("suggestions = %+v, want one", m.Suggestions)
			}
			s := m.Suggestions[0]
			if s.ID != "S001" || s.Tag != tc.wantTag || s.Impact != tc.wantImp || s.Title != tc.title ||
				s.Category != "reference-gap" || s.Status != "pending" || s.Effort != "medium" ||
				!reflect.DeepEqual(s.Files, []string{"AC-1"}) || s.OneLiner == "" || s.Description == "" || s.SuggestedApproach == "" {
				t.Errorf("suggestion = %+v", s)
			}
		})
	}
}

// The suggestion carries exactly the shared field set, no more, no less.
func TestSuggestionFieldSet(t *testing.T) {
	t.Parallel()
	out, err := json.Marshal(Suggestion{})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(out, &fields); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range fields {
		got = append(got, k)
	}
	sort.Strings(got)
	want := []string{"category", "description", "effort", "files", "id", "impact", "one_liner", "status", "suggested_approach", "tag", "title"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("suggestion fields = %v, want %v", got, want)
	}
}

func TestBuildManifestNumbersInNaturalOrder(t *testing.T) {
	t.Parallel()
	var comps []Comparison
	for _, id := range []string{"AC-12", "AC-2", "AC-100", "AC-1", "AC-20"} {
		comps = append(comps, Compared(id, Pair{Ours: "o", Reference: "r"}, oursFirst, verdict("B", 0.5, "g")))
	}
	m := BuildManifest("r", "s", time.Unix(0, 0), 0.75, comps)
	var got []string
	for _, s := range m.Suggestions {
		got = append(got, s.ID+"="+s.Files[0])
	}
	want := []string{"S001=AC-1", "S002=AC-2", "S003=AC-12", "S004=AC-20", "S005=AC-100"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("suggestions = %v, want %v", got, want)
	}
	// Input order does not matter.
	rev := make([]Comparison, len(comps))
	for i := range comps {
		rev[len(comps)-1-i] = comps[i]
	}
	m2 := BuildManifest("r", "s", time.Unix(0, 0), 0.75, rev)
	if !reflect.DeepEqual(m, m2) {
		t.Errorf("manifest depends on input order")
	}
}

// A compared record that does not re-derive is rewritten as a schema violation.
func TestBuildManifestRejectsUnderivableRecords(t *testing.T) {
	good := Compared("AC-1", Pair{Ours: "o", Reference: "r"}, oursFirst, verdict("A", 0.8, "g"))
	tests := []struct {
		name   string
		mutate func(c *Comparison)
		reason string
	}{
		{"winner flipped", func(c *Comparison) { c.Winner = WinnerReference }, "does not follow"},
		{"assignment flipped", func(c *Comparison) { c.LabelAssignment = refFirst }, "does not follow"},
		{"assignment invalid", func(c *Comparison) { c.LabelAssignment = Assignment{A: Ours, B: Ours} }, "label_assignment"},
		{"raw winner invalid", func(c *Comparison) { c.RawWinner = "C" }, "raw_winner"},
		{"confidence missing", func(c *Comparison) { c.Confidence = nil }, "confidence missing"},
		{"confidence NaN", func(c *Comparison) { c.Confidence = conf(math.NaN()) }, "confidence"},
		{"confidence high", func(c *Comparison) { c.Confidence = conf(1.2) }, "confidence"},
		{"unknown status", func(c *Comparison) { c.Status = "judged" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Confidence = conf(*good.Confidence)
			c.Tribunal = &ComparisonExtras{Answer: "kept"}
			tc.mutate(&c)
			m := BuildManifest("r", "s", time.Unix(0, 0), 0.75, []Comparison{c})
			if len(m.Suggestions) != 0 {
				t.Errorf("suggestions from an invalid record: %+v", m.Suggestions)
			}
			if code := kind.ExitCode(m.Outcomes()); code != kind.ExitSchemaViolation {
				t.Errorf("exit = %d, want %d", code, kind.ExitSchemaViolation)
			}
			if tc.reason == "" {
				return
			}
			got := m.Comparisons[0]
			if got.Status != StatusSchemaViolation || !strings.Contains(got.BlockedReason, tc.reason) {
				t.Errorf("record = %+v, want schema_violation mentioning %q", got, tc.reason)
			}
			if got.Winner != "" || got.Confidence != nil || got.Tribunal == nil || got.Tribunal.Answer != "kept" {
				t.Errorf("record = %+v: verdict fields must be cleared, extras kept", got)
			}
			if _, err := json.Marshal(m); err != nil {
				t.Errorf("marshal: %v", err)
			}
		})
	}
}

func TestComparisonConstructors(t *testing.T) {
	t.Parallel()
	p := Pair{Ours: "o", Reference: "r"}
	c := Compared("AC-3", p, refFirst, verdict("tie", 0.5, "g"))
	if c.RawWinner != "tie" || c.Winner != WinnerTie || c.Status != StatusCompared || *c.Confidence != 0.5 {
		t.Errorf("Compared = %+v", c)
	}
	c = Compared("AC-3", p, refFirst, verdict("B", 0.5, "g"))
	if c.Winner != WinnerOurs {
		t.Errorf("Compared B under A=reference = %s, want ours", c.Winner)
	}
	if s := SchemaViolation("AC-3", p, refFirst, nil); s.BlockedReason == "" || s.Status != StatusSchemaViolation {
		t.Errorf("SchemaViolation(nil) = %+v", s)
	}
	_, _, err := Resolve("AC-4", Pair{}, nil)
	b := Blocked("AC-4", Pair{}, Assign("AC-4", 0), err.Error())
	if b.Status != StatusBlocked || !strings.Contains(b.BlockedReason, "AC-4") || !errors.Is(err, ErrNoArtifacts) {
		t.Errorf("Blocked = %+v", b)
	}
	if b.Outcome(0.75) != kind.OutcomeBlocked {
		t.Errorf("blocked outcome = %s", b.Outcome(0.75))
	}
}

func TestManifestOutcomesThreshold(t *testing.T) {
	c := Compared("AC-1", Pair{Ours: "o", Reference: "r"}, oursFirst, verdict("A", 0.8, "g"))
	m := BuildManifest("r", "s", time.Unix(0, 0), 0.85, []Comparison{c})
	if got := m.Outcomes(); got[0] != kind.OutcomeFinding {
		t.Errorf("with recorded threshold 0.85: %v", got)
	}
	m.Tribunal = nil // a manifest from elsewhere: DefaultThreshold applies
	if got := m.Outcomes(); got[0] != kind.OutcomeClean {
		t.Errorf("with default threshold: %v", got)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	c := Compared("AC-1", Pair{Ours: "o", Reference: "r"}, oursFirst, verdict("B", 0.8, "g"))
	first := verdict("B", 0.8, "g")
	second := verdict("A", 0.85, "g")
	c.Tribunal = &ComparisonExtras{
		Judge: &JudgeInfo{Provider: "scripted", Model: "m", PromptVersion: "ab/v1"},
		Swap:  &SwapRecord{First: first, FirstAssignment: oursFirst, Second: second, SecondAssignment: refFirst, Consistent: true},
		Panel: &PanelResult{Winner: WinnerReference, Confidence: 0.8, Agreement: "1/1", For: 1, Size: 1, Votes: []Vote{{Judge: "m", Winner: WinnerReference, Confidence: 0.8}}},
	}
	m := BuildManifest("r", "s", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 0.75, []Comparison{c})
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip mismatch:\n got %+v\nwant %+v", back, m)
	}
}

func TestNaturalLess(t *testing.T) {
	t.Parallel()
	ids := []string{"AC-10", "AC-9", "AC-1a", "AC-1", "AC-01", "AC-100", "AC-2", "B-1", "AC-", "AC-x"}
	sort.SliceStable(ids, func(i, j int) bool { return naturalLess(ids[i], ids[j]) })
	want := []string{"AC-", "AC-01", "AC-1", "AC-1a", "AC-2", "AC-9", "AC-10", "AC-100", "AC-x", "B-1"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("order = %v, want %v", ids, want)
	}
	for _, a := range want {
		if naturalLess(a, a) {
			t.Errorf("naturalLess(%q, %q) = true", a, a)
		}
	}
}

// TestCFNManifestHasTheSeedsStatusesOnly: the manifest written for seed 000's vote step
// carries compared and blocked records only; a schema violation is blocked with the
// violation as its reason, and the batch's own manifest keeps its richer status.
func TestCFNManifestHasTheSeedsStatusesOnly(t *testing.T) {
	t.Parallel()
	p := Pair{Ours: "o.md", Reference: "r.md"}
	comps := []Comparison{
		Compared("AC-1", p, Assign("AC-1", 0), RawVerdict{RawWinner: "A", Confidence: 0.9, BiggestGap: "g"}),
		Blocked("AC-2", p, Assign("AC-2", 0), "ours artifact \"o.md\": missing"),
		SchemaViolation("AC-3", p, Assign("AC-3", 0), errors.New(`ab verdict: raw_winner "C": must be "A", "B" or "tie"`)),
	}
	m := BuildManifest("ab-t-b", "tribunal", time.Unix(0, 0), 0.75, comps)
	c := m.CFN("123")
	if c.ReviewID != "ab-critic-123" || c.Source != "cfn-ab-critic" || m.ReviewID != "ab-t-b" {
		t.Fatalf("ids %s %s (own %s)", c.ReviewID, c.Source, m.ReviewID)
	}
	want := []struct{ status, reason string }{{"compared", ""}, {"blocked", "ours artifact \"o.md\": missing"},
		{"blocked", `schema violation: ab verdict: raw_winner "C": must be "A", "B" or "tie"`}}
	for i, w := range want {
		if got := c.Comparisons[i]; string(got.Status) != w.status || got.BlockedReason != w.reason {
			t.Errorf("comparison %d: %s %q; want %s %q", i, got.Status, got.BlockedReason, w.status, w.reason)
		}
	}
	if m.Comparisons[2].Status != StatusSchemaViolation {
		t.Errorf("the batch's own manifest lost its status: %s", m.Comparisons[2].Status)
	}
	if got := kind.ExitCode(m.Outcomes()); got != kind.ExitSchemaViolation {
		t.Errorf("exit %d", got)
	}
}
