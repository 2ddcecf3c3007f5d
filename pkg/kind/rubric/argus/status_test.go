package argus

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestFoldFeatureStatus(t *testing.T) {
	t.Parallel()
	signed := func(k string) ViewOutcome {
		return ViewOutcome{View: k, Result: ViewSignedOff, HumanSpotcheck: SpotcheckPending}
	}
	a, b := "list/populated/light", "list/empty/light"
	cases := []struct {
		name   string
		in     FeatureInput
		status FeatureStatus
		reason string
	}{
		{"all signed off", FeatureInput{Views: []ViewOutcome{signed(a), signed(b)}}, StatusDone, ""},
		{"spot-check approved", FeatureInput{Views: []ViewOutcome{{View: a, Result: ViewSignedOff, HumanSpotcheck: SpotcheckApproved}}}, StatusDone, ""},
		{"a frozen dimension", FeatureInput{Views: []ViewOutcome{signed(a), {View: b, Result: ViewSignedOff, Frozen: []string{"layout_spacing"}}}},
			StatusDoneWithConcerns, "list/empty/light: dimension layout_spacing frozen"},
		{"spot-check names a dimension", FeatureInput{Views: []ViewOutcome{{View: a, Result: ViewSignedOff, HumanSpotcheck: "typography"}}},
			StatusDoneWithConcerns, "judge got typography wrong"},
		{"canonical reference needed", FeatureInput{Views: []ViewOutcome{signed(a), {View: b, Result: ViewNeedsReference}}}, StatusNeedsContext, "reference image awaits a human"},
		{"needs context beats concerns", FeatureInput{Views: []ViewOutcome{{View: a, Result: ViewSignedOff, Frozen: []string{"x"}}, {View: b, Result: ViewNeedsReference}}},
			StatusNeedsContext, ""},
		{"invalid spec", FeatureInput{SpecErrors: []LintError{{Path: "feature", Message: "is required"}}}, StatusBlocked, "spec invalid: feature: is required"},
		{"no sensor", FeatureInput{NoSensor: "ios", Views: []ViewOutcome{{View: a, Result: ViewInProgress}}}, StatusBlocked, `adapter "ios" has no sensor`},
		{"budget spent blocks, even beside a needed reference", FeatureInput{Views: []ViewOutcome{{View: a, Result: ViewBudgetExhausted}, {View: b, Result: ViewNeedsReference}}},
			StatusBlocked, "iteration budget spent"},
		{"a blocked view", FeatureInput{Views: []ViewOutcome{{View: a, Result: ViewBlocked, Reason: "sensor failed"}}}, StatusBlocked, "sensor failed"},
		{"still running", FeatureInput{Views: []ViewOutcome{signed(a), {View: b, Result: ViewInProgress}}}, StatusInProgress, "still converging"},
		{"nothing to judge", FeatureInput{}, StatusBlocked, "no views"},
		{"unknown result is not success", FeatureInput{Views: []ViewOutcome{{View: a, Result: "done"}}}, StatusBlocked, "unknown view result"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := FoldFeatureStatus(c.in)
			if r.Status != c.status || !strings.Contains(strings.Join(r.Reasons, "\n"), c.reason) {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestNewSignOff(t *testing.T) {
	v := View{Target: "list", State: "populated", Appearance: "light"}
	s := NewLoopState("habits", v.Key(), SourceCandidate)
	s.Iteration = 4
	final := &Verdict{Iteration: 4, Feature: "habits", Target: "list", AllPass: true, FailedDimensions: []string{},
		Dimensions: map[string]DimensionScore{"a": {Score: 1, Anchor: AnchorSpecText, Evidence: "e"}}}
	at := time.Date(2026, 8, 4, 12, 0, 0, 0, time.FixedZone("x", 3600))
	so := NewSignOff("habits", v, s, final, "team-a/sha256/abc", at)
	out, err := json.Marshal(so)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"feature":"habits"`, `"target":"list"`, `"state":"populated"`, `"appearance":"light"`,
		`"signed_off_at":"2026-08-04T11:00:00Z"`, `"iterations":4`, `"reference_source":"candidate"`, `"final_verdict":{`,
		`"snapshot_baseline":"team-a/sha256/abc"`, `"human_spotcheck":"pending"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s lacks %s", out, want)
		}
	}
}

func TestRubric(t *testing.T) {
	t.Parallel()
	r := DefaultRubric()
	want := "visual_fidelity,token_compliance,layout_spacing,typography,hierarchy,functional_correctness,accessibility"
	if got := strings.Join(r.DimensionNames(), ","); got != want {
		t.Fatalf("dimensions %s", got)
	}
	if r.LoopParams() != DefaultLoopParams() || r.Dimensions["visual_fidelity"].Weight != 2 ||
		r.Dimensions["functional_correctness"].Anchor != AnchorSpecText || r.Threshold("typography") != 1 || r.Threshold("unlisted") != 1 {
		t.Fatalf("%+v", r)
	}
	// Copies are independent.
	r.Dimensions["typography"] = RubricDimension{Threshold: 0, Anchor: AnchorReference}
	if DefaultRubric().Dimensions["typography"].Threshold != 1 {
		t.Fatal("DefaultRubric shares state")
	}

	short, err := ParseRubric([]byte(`{"_comment":"x","loop":{"max_iterations_default":5},"dimensions":{"fit":{"anchor":"reference"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if short.LoopParams() != (LoopParams{RequiredPasses: 2, MaxAttempts: 3, MaxIterations: 5}) || short.Dimensions["fit"].Threshold != 1 || short.Dimensions["fit"].Weight != 1 {
		t.Fatalf("%+v", short)
	}
	for _, bad := range []string{`{}`, `{"dimensions":{}}`, `{"dimensions":{"a":{}}}`, `{"dimensions":{"a":{"anchor":"vibes"}}}`,
		`{"dimensions":{"a":{"anchor":"reference","threshold":2}}}`, `{"loop":{"max_iterations_default":0},"dimensions":{"a":{"anchor":"reference"}}}`,
		`{"loops":{},"dimensions":{"a":{"anchor":"reference"}}}`} {
		if _, err := ParseRubric([]byte(bad)); err == nil {
			t.Errorf("rubric %s accepted", bad)
		}
	}
	if !json.Valid(DefaultRubricJSON()) {
		t.Error("embedded rubric is not JSON")
	}
}

// TestCheckSpotcheck pins HE-2 of the seed: "the human sets human_spotcheck:"approved",
// or names the dimension the judge got wrong so you can tune rubric.json". A rejection
// must name a dimension of the view's rubric; "reject" or a typo is not one.
func TestCheckSpotcheck(t *testing.T) {
	t.Parallel()
	r := DefaultRubric()
	custom, err := ParseRubric([]byte(`{"dimensions":{"fit":{"anchor":"reference"},"reject":{"anchor":"spec-text"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		rubric   *Rubric
		approved bool
		dim      string
		wantErr  string
	}{
		{"approve", r, true, "", ""},
		{"a rubric dimension", r, false, "typography", ""},
		{"the decision word", r, false, "reject", `"reject" is not a dimension of the rubric`},
		{"a typo", r, false, "typograpy", `"typograpy" is not a dimension`},
		{"another feature's dimension", r, false, "fit", `"fit" is not a dimension`},
		{"no dimension", r, false, "", "names the dimension the judge got wrong: one of visual_fidelity, token_compliance"},
		{"approval naming a dimension", r, true, "typography", "names no dimension"},
		{"a feature rubric's own dimension", custom, false, "fit", ""},
		{"a dimension literally named reject", custom, false, "reject", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rubric.CheckSpotcheck(tc.approved, tc.dim)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckSpotcheck = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
