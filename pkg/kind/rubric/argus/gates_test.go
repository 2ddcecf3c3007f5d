package argus

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseAdapterGates(t *testing.T) {
	t.Parallel()
	g, err := ParseAdapterGates([]byte(`{"build":"pass","lint":"fail","type_check":"skip","token_compliance":"pass","snapshot":"diff","flows":"pass"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := AdapterGates{Build: GatePass, Lint: GateFail, TypeCheck: GateSkip, TokenCompliance: GatePass, Snapshot: GateDiff, Flows: GatePass}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("%+v", g)
	}
	if g, err := ParseAdapterGates([]byte(` {} `)); err != nil || !reflect.DeepEqual(g, AdapterGates{}) {
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
		{`{"e2e":"passed"}`, `gate e2e: "passed" is not pass, fail or skip`},
		{`{"e2e":"diff"}`, `gate e2e: "diff" is not pass, fail or skip`},
		{`{"bad name!":"pass"}`, `gate name "bad name!"`},
		{`{"build":"pass","build":"fail"}`, "duplicate key"},
	} {
		if _, err := ParseAdapterGates([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.in, err, c.want)
		}
	}
}

// TestAdapterOwnGatesIgnored: the seed's gates.sh owns token_contrast and a11y_ids
// ("module computes token_contrast + a11y_ids over the fresh probe; the adapter supplies
// build/lint/type/token_compliance/snapshot/flows") and overwrites whatever an adapter
// prints for them ('$base * $adapter * {token_contrast: $tc, a11y_ids: $a11y}'). An
// adapter printing them is therefore no error: they are left out, whatever their value,
// and listed so that the result can say so.
func TestAdapterOwnGatesIgnored(t *testing.T) {
	t.Parallel()
	g, err := ParseAdapterGates([]byte(`{"build":"pass","token_contrast":"fail","a11y_ids":"pass"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := AdapterGates{Build: GatePass, Ignored: map[string]string{GateTokenContrast: `"fail"`, GateA11yIDs: `"pass"`}}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("%+v, want %+v", g, want)
	}
	r := AssembleGateResult(View{Target: "list"}, "f", g, GatePass, &A11yResult{Expected: 1, Present: 1})
	if !r.AllGreen || r.Gates.TokenContrast != GatePass {
		t.Fatalf("the adapter's token_contrast reached the result: %+v", r.Gates)
	}
}

// TestGateNotesRoundTrip: tribunal's additions to a gate result (why gates read skip,
// what was ignored) sit under one "tribunal" key that the gate-result schema copy allows
// and the strict parser reads back.
func TestGateNotesRoundTrip(t *testing.T) {
	t.Parallel()
	r := AssembleGateResult(View{Target: "list", State: "empty", Appearance: "dark"}, "f", AdapterGates{Build: GatePass}, GateSkip, nil)
	r.Tribunal = &GateNotes{GatesAdapter: "argus/adapters/web/gates.sh", Skipped: map[string]string{"lint": "not reported"}, Ignored: map[string]string{"token_contrast": "printed"}}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseGateResult(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if !reflect.DeepEqual(back.Tribunal, r.Tribunal) {
		t.Fatalf("read back %+v", back.Tribunal)
	}
	if _, err := ParseGateResult([]byte(strings.Replace(string(data), `"gates_adapter"`, `"other"`, 1))); err == nil {
		t.Error("an unknown key under tribunal was taken")
	}
}

// TestSkipped lists the gates reading skip.
func TestSkipped(t *testing.T) {
	t.Parallel()
	g := Gates{Build: GatePass, Lint: GateSkip, Flows: GateSkip, Extra: []ExtraGate{{Name: "e2e", Status: GateSkip}, {Name: "x", Status: GatePass}}}
	if got := strings.Join(g.Skipped(), ","); got != "lint,flows,e2e" {
		t.Fatalf("Skipped = %s", got)
	}
}

// TestAllGreenDerived: all_green comes from the gate map alone.
func TestAllGreenDerived(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestExtraAdapterGates pins the seed's gates.sh, which merges the adapter's whole JSON
// object into the result ('$base * $adapter * {token_contrast, a11y_ids}') and lets
// verdict_validate.py derive all_green over every key: "gate '<name>' must be
// pass|fail|skip" and a "fail" makes all_green false. So a gate beyond the six platform
// gates is reported when it passes and turns the floor red when it fails; it never
// breaks the adapter's result (a failed build gate) as an unknown key.
func TestExtraAdapterGates(t *testing.T) {
	t.Parallel()
	v := View{Target: "list", State: "populated", Appearance: "light"}
	for _, tc := range []struct {
		name, adapter string
		green         bool
		failing       []string
	}{
		{"a passing extra gate is reported", `{"build":"pass","visual_a11y":"pass"}`, true, []string{}},
		{"a skipped extra gate does not count", `{"perf":"skip"}`, true, []string{}},
		{"a failing extra gate turns the result red", `{"build":"pass","perf":"fail","e2e.smoke":"pass"}`, false, []string{"perf"}},
		{"beside a failing platform gate", `{"lint":"fail","perf":"fail"}`, false, []string{"lint", "perf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag, err := ParseAdapterGates([]byte(tc.adapter))
			if err != nil {
				t.Fatal(err)
			}
			r := AssembleGateResult(v, "habits", ag, GatePass, &A11yResult{Missing: []string{}})
			if r.AllGreen != tc.green || !reflect.DeepEqual(r.Gates.Failing(), tc.failing) {
				t.Fatalf("all_green %v failing %q, want %v %q", r.AllGreen, r.Gates.Failing(), tc.green, tc.failing)
			}
			out, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Gates map[string]any `json:"gates"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			for _, e := range ag.Extra {
				if doc.Gates[e.Name] != string(e.Status) {
					t.Errorf("gate-result %s does not report %s=%s", out, e.Name, e.Status)
				}
			}
			back, err := ParseGateResult(out)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := back.Normalize(); err != nil || d || !reflect.DeepEqual(back.Gates.Extra, ag.Extra) {
				t.Fatalf("round trip: %+v %v %v", back.Gates.Extra, d, err)
			}
			if names := r.Gates.Names(); len(names) != 7+len(ag.Extra) {
				t.Fatalf("names %q", names)
			}
		})
	}
}
