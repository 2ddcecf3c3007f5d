package argus

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAdapterGates(t *testing.T) {
	g, err := ParseAdapterGates([]byte(`{"build":"pass","lint":"fail","type_check":"skip","token_compliance":"pass","snapshot":"diff","flows":"pass"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := AdapterGates{Build: GatePass, Lint: GateFail, TypeCheck: GateSkip, TokenCompliance: GatePass, Snapshot: GateDiff, Flows: GatePass}
	if g != want {
		t.Fatalf("%+v", g)
	}
	if g, err := ParseAdapterGates([]byte(` {} `)); err != nil || g != (AdapterGates{}) {
		t.Fatalf("empty object: %+v %v", g, err)
	}
	for _, c := range []struct{ in, want string }{
		{`build: pass`, "not one JSON object"},
		{`{"build":"pass"} done`, "not one JSON object"},
		{`["pass"]`, "want an object"},
		{`{"build":"passed"}`, `gate build: "passed" is not pass, fail or skip`},
		{`{"build":"diff"}`, "is not pass, fail or skip"},
		{`{"snapshot":"fail"}`, "is not pass, diff or skip"},
		{`{"flows":true}`, "is not pass, fail or skip"},
		{`{"lint":""}`, "is not pass, fail or skip"},
		{`{"e2e":"pass"}`, `unknown gate "e2e"`},
		{`{"token_contrast":"pass"}`, "computed by tribunal"},
		{`{"a11y_ids":{"expected":0,"present":0,"missing":[]}}`, "computed by tribunal"},
		{`{"build":"pass","build":"fail"}`, "duplicate key"},
	} {
		if _, err := ParseAdapterGates([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.in, err, c.want)
		}
	}
}

// TestAllGreenDerived: all_green comes from the gate map alone.
func TestAllGreenDerived(t *testing.T) {
	missing := &A11yResult{Expected: 2, Present: 1, Missing: []string{"row.item.*"}}
	ok := &A11yResult{Expected: 2, Present: 2, Missing: []string{}}
	cases := []struct {
		name    string
		g       Gates
		green   bool
		failing string
	}{
		{"all skipped", Gates{Build: GateSkip, Lint: GateSkip, Snapshot: GateSkip}, true, ""},
		{"nothing reported", Gates{}, true, ""},
		{"pass and skip", Gates{Build: GatePass, Lint: GateSkip, TokenContrast: GatePass, A11yIDs: ok}, true, ""},
		{"one fail", Gates{Build: GatePass, Flows: GateFail}, false, "flows"},
		{"snapshot diff fails", Gates{Snapshot: GateDiff}, false, "snapshot"},
		{"a11y missing fails", Gates{Build: GatePass, A11yIDs: missing}, false, "a11y_ids"},
		{"several", Gates{Build: GateFail, TokenContrast: GateFail, A11yIDs: missing}, false, "build,token_contrast,a11y_ids"},
		{"unknown value is never green", Gates{Lint: "passed"}, false, "lint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.g.AllGreen() != c.green || strings.Join(c.g.Failing(), ",") != c.failing {
				t.Errorf("green %v failing %v", c.g.AllGreen(), c.g.Failing())
			}
		})
	}
}

func TestGateResultNormalize(t *testing.T) {
	doc := `{"feature":"habits","target":"list","state":"populated","appearance":"dark",
	  "gates":{"build":"pass","lint":"pass","type_check":"pass","token_contrast":"pass","token_compliance":"pass",
	           "snapshot":"diff","flows":"pass","a11y_ids":{"expected":3,"present":3,"missing":[]}},
	  "all_green":true}`
	r, err := ParseGateResult([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	disagreed, err := r.Normalize()
	if err != nil || !disagreed || r.AllGreen {
		t.Fatalf("disagreed %v all_green %v err %v", disagreed, r.AllGreen, err)
	}
	disagreed, err = r.Normalize()
	if err != nil || disagreed {
		t.Fatalf("second normalize: %v %v", disagreed, err)
	}
	var tally SelfReportTally
	tally.Add(true)
	tally.Add(false)
	if tally != (SelfReportTally{Checked: 2, Disagreements: 1}) {
		t.Errorf("tally %+v", tally)
	}

	bad := GateResult{Gates: Gates{Snapshot: GateFail}}
	if _, err := bad.Normalize(); err == nil {
		t.Error("snapshot fail accepted")
	}
	for _, c := range []struct{ in, want string }{
		{`{"feature":"f","target":"t","gates":{}}`, "all_green is required"},
		{`{"feature":"f","target":"t","gates":{},"all_green":true,"extra":1}`, `unknown key "extra"`},
		{`{"feature":"f","target":"t","gates":{"a11y_ids":{"expected":1,"present":0}},"all_green":true}`, "a11y_ids.missing is required"},
		{`{"feature":"f","target":"t","gates":{"a11y_ids":{"expected":-1,"present":0,"missing":[]}},"all_green":true}`, "whole number >= 0"},
		{`{"feature":"f","target":"t","gates":{"snapshot":"fail"},"all_green":true}`, "pass, diff or skip"},
	} {
		if _, err := ParseGateResult([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestAssembleGateResult(t *testing.T) {
	v := View{Target: "list", State: "populated", Appearance: "light"}
	r := AssembleGateResult(v, "habits", AdapterGates{Build: GatePass}, GatePass, &A11yResult{Expected: 1, Present: 1})
	if !r.AllGreen {
		t.Fatalf("%+v", r)
	}
	out, _ := json.Marshal(r)
	for _, want := range []string{`"lint":"skip"`, `"snapshot":"skip"`, `"token_contrast":"pass"`, `"missing":[]`, `"all_green":true`, `"state":"populated"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s lacks %s", out, want)
		}
	}
	// The assembled document reads back under the strict parser.
	back, err := ParseGateResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := back.Normalize(); err != nil || d {
		t.Fatalf("round trip disagreed %v %v", d, err)
	}
	red := AssembleGateResult(v, "habits", AdapterGates{}, GateFail, nil)
	if red.AllGreen || red.Gates.A11yIDs == nil || red.Gates.A11yIDs.Missing == nil {
		t.Fatalf("%+v", red)
	}
	if err := red.Gates.Validate(); err != nil {
		t.Fatal(err)
	}
}
