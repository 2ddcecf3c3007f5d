package argus

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// goodVerdict scores all seven default dimensions; layout_spacing is 0.5.
const goodVerdict = `{
  "iteration": 3, "feature": "habits", "target": "list", "state": "populated", "appearance": "dark",
  "reference_source": "human",
  "dimensions": {
    "visual_fidelity":        {"score": 1,   "anchor": "reference",     "evidence": "rows and header sit where the reference has them"},
    "token_compliance":       {"score": 1,   "anchor": "design-system", "evidence": "surface and text colours are tokens"},
    "layout_spacing":         {"score": 0.5, "anchor": "design-system", "evidence": "row gap reads 12px; the scale has 8 and 16"},
    "typography":             {"score": 1,   "anchor": "design-system", "evidence": "title 22, body 16"},
    "hierarchy":              {"score": 1,   "anchor": "design-system", "evidence": "create button is the strongest element"},
    "functional_correctness": {"score": 1,   "anchor": "spec-text",     "evidence": "three rows for three fixture items"},
    "accessibility":          {"score": 1,   "anchor": "spec-text",     "evidence": "contract ids present with labels"}
  },
  "closer_to_reference_than_prev": true,
  "all_pass": false,
  "failed_dimensions": ["layout_spacing"],
  "notes": "one off-grid gap"
}`

func editVerdict(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(goodVerdict), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dim(m map[string]any, name string) map[string]any {
	return m["dimensions"].(map[string]any)[name].(map[string]any)
}

func TestParseVerdict(t *testing.T) {
	t.Parallel()
	v, err := ParseVerdict([]byte(goodVerdict))
	if err != nil {
		t.Fatal(err)
	}
	if v.Iteration != 3 || v.Dimensions["layout_spacing"].Score != 0.5 || v.CloserToReferenceThanPrev == nil || !*v.CloserToReferenceThanPrev {
		t.Fatalf("%+v", v)
	}
	// A fenced answer is the same answer.
	if _, err := ParseVerdict([]byte("```json\n" + goodVerdict + "\n```\n")); err != nil {
		t.Fatalf("fenced: %v", err)
	}
	// Integral floats are integers; null rank is allowed.
	if _, err := ParseVerdict(editVerdict(t, func(m map[string]any) { m["iteration"] = 1.0; m["closer_to_reference_than_prev"] = nil })); err != nil {
		t.Fatal(err)
	}
}

func TestParseVerdictViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		data  []byte
		field string
	}{
		{"score 0.7", editVerdict(t, func(m map[string]any) { dim(m, "typography")["score"] = 0.7 }), "dimensions.typography.score"},
		{"score as a string", editVerdict(t, func(m map[string]any) { dim(m, "typography")["score"] = "1" }), "dimensions.typography.score"},
		{"score above 1", editVerdict(t, func(m map[string]any) { dim(m, "typography")["score"] = 2 }), "dimensions.typography.score"},
		{"anchor vibes", editVerdict(t, func(m map[string]any) { dim(m, "hierarchy")["anchor"] = "vibes" }), "dimensions.hierarchy.anchor"},
		{"missing evidence", editVerdict(t, func(m map[string]any) { delete(dim(m, "layout_spacing"), "evidence") }), "dimensions.layout_spacing.evidence"},
		{"blank evidence", editVerdict(t, func(m map[string]any) { dim(m, "layout_spacing")["evidence"] = "  " }), "dimensions.layout_spacing.evidence"},
		{"unknown dimension field", editVerdict(t, func(m map[string]any) { dim(m, "typography")["confidence"] = 0.9 }), "dimensions.typography.confidence"},
		{"iteration 0", editVerdict(t, func(m map[string]any) { m["iteration"] = 0 }), "iteration"},
		{"iteration 1.5", editVerdict(t, func(m map[string]any) { m["iteration"] = 1.5 }), "iteration"},
		{"extra field", editVerdict(t, func(m map[string]any) { m["diff_seen"] = false }), "diff_seen"},
		{"missing feature", editVerdict(t, func(m map[string]any) { delete(m, "feature") }), "feature"},
		{"missing target", editVerdict(t, func(m map[string]any) { delete(m, "target") }), "target"},
		{"missing all_pass", editVerdict(t, func(m map[string]any) { delete(m, "all_pass") }), "all_pass"},
		{"failed_dimensions not strings", editVerdict(t, func(m map[string]any) { m["failed_dimensions"] = []any{1} }), "failed_dimensions[0]"},
		{"reference_source bad", editVerdict(t, func(m map[string]any) { m["reference_source"] = "designer" }), "reference_source"},
		{"empty dimensions", editVerdict(t, func(m map[string]any) { m["dimensions"] = map[string]any{} }), "dimensions"},
		{"rank not a boolean", editVerdict(t, func(m map[string]any) { m["closer_to_reference_than_prev"] = "yes" }), "closer_to_reference_than_prev"},
		{"duplicate key", []byte(`{"iteration":1,"iteration":2}`), "iteration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := ParseVerdict(c.data)
			if err == nil {
				t.Fatalf("accepted: %+v", v)
			}
			var ve *VerdictError
			if !errors.As(err, &ve) || !ve.Has(c.field) {
				t.Fatalf("error %v does not name %s", err, c.field)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("no FieldError for %s: %v", c.field, err)
			}
		})
	}
	// Several violations are all reported.
	_, err := ParseVerdict(editVerdict(t, func(m map[string]any) {
		m["iteration"] = 0
		dim(m, "typography")["score"] = 0.7
		m["extra"] = 1
	}))
	var ve *VerdictError
	if !errors.As(err, &ve) || len(ve.Fields) != 3 {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{``, `[]`, `prose {"iteration":1}`, "```python\n{}\n```", "```json\n{}"} {
		if _, err := ParseVerdict([]byte(bad)); !errors.Is(err, strictjson.ErrNotObject) || !strings.HasPrefix(err.Error(), "verdict: ") {
			t.Errorf("%q: %v, want strictjson.ErrNotObject naming the verdict", bad, err)
		}
	}
}

func TestNormalizeVerdict(t *testing.T) {
	parse := func(data []byte) Verdict {
		t.Helper()
		v, err := ParseVerdict(data)
		if err != nil {
			t.Fatal(err)
		}
		return *v
	}
	// Consistent self-report: nothing to correct.
	c, err := NormalizeVerdict(parse([]byte(goodVerdict)), nil)
	if err != nil || c.Disagreed || c.Verdict.AllPass || !reflect.DeepEqual(c.Verdict.FailedDimensions, []string{"layout_spacing"}) {
		t.Fatalf("%+v %v", c, err)
	}

	// all_pass true while a score is 0.5: corrected and reported.
	c, err = NormalizeVerdict(parse(editVerdict(t, func(m map[string]any) {
		m["all_pass"] = true
		m["failed_dimensions"] = []any{}
	})), nil)
	if err != nil || !c.Disagreed || c.Verdict.AllPass || !reflect.DeepEqual(c.Verdict.FailedDimensions, []string{"layout_spacing"}) ||
		!c.ReportedAllPass || len(c.Disagreements) != 2 {
		t.Fatalf("%+v %v", c, err)
	}

	// all_pass false with every score 1: the judge undersold; corrected to a pass.
	c, err = NormalizeVerdict(parse(editVerdict(t, func(m map[string]any) { dim(m, "layout_spacing")["score"] = 1 })), nil)
	if err != nil || !c.Disagreed || !c.Verdict.AllPass || len(c.Verdict.FailedDimensions) != 0 {
		t.Fatalf("%+v %v", c, err)
	}

	// Failed list in the rubric's order, whatever order the judge used.
	c, _ = NormalizeVerdict(parse(editVerdict(t, func(m map[string]any) {
		dim(m, "accessibility")["score"] = 0
		dim(m, "visual_fidelity")["score"] = 0
		m["failed_dimensions"] = []any{"accessibility", "layout_spacing", "visual_fidelity"}
	})), nil)
	if c.Disagreed || strings.Join(c.Verdict.FailedDimensions, ",") != "visual_fidelity,layout_spacing,accessibility" {
		t.Fatalf("%+v", c)
	}

	// A rubric threshold of 0.5 lets 0.5 pass.
	r := DefaultRubric()
	d := r.Dimensions["layout_spacing"]
	d.Threshold = 0.5
	r.Dimensions["layout_spacing"] = d
	c, _ = NormalizeVerdict(parse([]byte(goodVerdict)), r)
	if !c.Verdict.AllPass || !c.Disagreed {
		t.Fatalf("%+v", c)
	}

	// Rubric coverage: missing, extra and mis-anchored dimensions are violations.
	for _, tc := range []struct {
		name, field string
		f           func(m map[string]any)
	}{
		{"missing rubric dimension", "dimensions.typography", func(m map[string]any) { delete(m["dimensions"].(map[string]any), "typography") }},
		{"dimension outside the rubric", "dimensions.vibe", func(m map[string]any) {
			m["dimensions"].(map[string]any)["vibe"] = map[string]any{"score": 1, "anchor": "reference", "evidence": "nice"}
		}},
		{"wrong anchor for the rubric", "dimensions.accessibility.anchor", func(m map[string]any) { dim(m, "accessibility")["anchor"] = "reference" }},
	} {
		_, err := NormalizeVerdict(parse(editVerdict(t, tc.f)), nil)
		var ve *VerdictError
		if !errors.As(err, &ve) || !ve.Has(tc.field) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A verdict built in code is validated too.
	if _, err := NormalizeVerdict(Verdict{Iteration: 1, Feature: "f", Target: "t"}, nil); err == nil {
		t.Error("empty verdict normalized")
	}
}

// TestParseJudgeVerdict: the judge's answer is checked against the schema it was sent,
// the rubric's dimensions spelled out, with the view's identity stated by the service.
func TestParseJudgeVerdict(t *testing.T) {
	t.Parallel()
	id := ViewIdentity{Iteration: 4, Feature: "habits", Target: "list", State: "populated", Appearance: "dark", ReferenceSource: "human"}
	// The model misfiles its verdict (another iteration, another view): the service's
	// identity stands.
	answer := editVerdict(t, func(m map[string]any) { m["iteration"] = "three"; m["target"] = "detail"; delete(m, "state") })
	v, err := ParseJudgeVerdict(nil, id, answer)
	if err != nil || v.Iteration != 4 || v.Target != "list" || v.State != "populated" {
		t.Fatalf("%+v %v", v, err)
	}
	var sent struct {
		Properties struct {
			Dimensions struct {
				Required   []string `json:"required"`
				Properties map[string]struct {
					Properties struct {
						Anchor struct{ Enum []string } `json:"anchor"`
					} `json:"properties"`
				} `json:"properties"`
			} `json:"dimensions"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(JudgeVerdictSchema(nil), &sent); err != nil {
		t.Fatal(err)
	}
	if d := sent.Properties.Dimensions; !reflect.DeepEqual(d.Required, DefaultRubric().DimensionNames()) ||
		!reflect.DeepEqual(d.Properties["typography"].Properties.Anchor.Enum, []string{AnchorDesignSystem}) {
		t.Fatalf("sent dimensions %+v", d)
	}
	for _, tc := range []struct {
		name, field string
		data        []byte
	}{
		{"a rubric dimension missing", "dimensions.typography", editVerdict(t, func(m map[string]any) { delete(m["dimensions"].(map[string]any), "typography") })},
		{"a dimension outside the rubric", "dimensions.vibe", editVerdict(t, func(m map[string]any) {
			m["dimensions"].(map[string]any)["vibe"] = map[string]any{"score": 1, "anchor": "reference", "evidence": "nice"}
		})},
		{"the wrong anchor", "dimensions.accessibility.anchor", editVerdict(t, func(m map[string]any) { dim(m, "accessibility")["anchor"] = "reference" })},
		{"a repeated key", "dimensions.typography.score", []byte(strings.Replace(goodVerdict, `"score": 1,   "anchor": "design-system", "evidence": "title 22, body 16"`,
			`"score": 1, "score": 0, "anchor": "design-system", "evidence": "title 22, body 16"`, 1))},
	} {
		_, err := ParseJudgeVerdict(nil, id, tc.data)
		var ve *VerdictError
		if !errors.As(err, &ve) || !ve.Has(tc.field) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// FuzzParseVerdict: the parser never panics, anything it accepts is valid, and an
// accepted verdict survives a marshal/parse round trip unchanged.
func FuzzParseVerdict(f *testing.F) {
	f.Add([]byte(goodVerdict))
	f.Add([]byte("```json\n" + goodVerdict + "\n```"))
	f.Add([]byte(`{"iteration":1,"feature":"f","target":"t","dimensions":{"a":{"score":0,"anchor":"spec-text","evidence":"e"}},"all_pass":true,"failed_dimensions":[]}`))
	f.Add([]byte(`{"iteration":1,"feature":"f","target":"t","dimensions":{"a":{"score":-0,"anchor":"reference","evidence":"\u0000"}},"all_pass":false,"failed_dimensions":["a","a"],"closer_to_reference_than_prev":null}`))
	f.Add([]byte(`{"iteration":1e0,"feature":"f","target":"t","dimensions":{"a.b":{"score":5e-1,"anchor":"design-system","evidence":"x"}},"all_pass":false,"failed_dimensions":[]}`))
	f.Add([]byte(`{"iteration":0,"dimensions":{"x":{"score":0.7,"anchor":"vibes"}},"extra":1}`))
	f.Add([]byte(`{"iteration":1,"iteration":1}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte("```\n{}\n```"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseVerdict(data)
		if err != nil {
			if v != nil {
				t.Fatal("verdict returned with an error")
			}
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("accepted an invalid verdict: %v", err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseVerdict(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if vs := checkSchema(verdictSchema, out); len(vs) != 0 {
			t.Fatalf("accepted a verdict the seed's schema refuses: %s: %+v", out, vs)
		}
		if !reflect.DeepEqual(v, back) {
			t.Fatalf("round trip changed the verdict:\n%+v\n%+v", v, back)
		}
		if c, err := NormalizeVerdict(*v, nil); err == nil {
			if c.Verdict.AllPass != (len(c.Verdict.FailedDimensions) == 0) {
				t.Fatal("normalized all_pass disagrees with failed_dimensions")
			}
		}
	})
}

// BenchmarkParseVerdict is the cost per rubric verdict: the judge's check of its answer and
// the aggregator's of the recorded one.
func BenchmarkParseVerdict(b *testing.B) {
	in := []byte(goodVerdict)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseVerdict(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNormalizeVerdict is the aggregator's re-derivation of a parsed verdict.
func BenchmarkNormalizeVerdict(b *testing.B) {
	v, err := ParseVerdict([]byte(goodVerdict))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NormalizeVerdict(*v, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseJudgeVerdict is the rubric judge's check of its answer, against the
// rubric's schema with the view's identity put in.
func BenchmarkParseJudgeVerdict(b *testing.B) {
	in := []byte(goodVerdict)
	r := DefaultRubric()
	id := ViewIdentity{Iteration: 3, Feature: "habits", Target: "list", State: "populated", Appearance: "dark", ReferenceSource: "human"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseJudgeVerdict(r, id, in); err != nil {
			b.Fatal(err)
		}
	}
}
