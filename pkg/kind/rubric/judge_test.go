package rubric

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// TestJudgeSeesWhatTheSeedLists pins the judge's inputs to the seed's list ("Inputs the
// caller gives you: spec.json, spec.md, tokens.json, reference, render, probe.json,
// gate-result.json, rubric.json, prev_render (optional), reference_source"), each fenced
// as data, spec.json's contract and the gate result included.
func TestJudgeSeesWhatTheSeedLists(t *testing.T) {
	t.Parallel()
	img := judge.Image{MediaType: "image/png", Data: []byte("png")}
	in := Input{Feature: "f", Target: "t", State: "s", Appearance: "a", ReferenceSource: "candidate", Iteration: 3,
		Rubric: argus.DefaultRubric(), RubricJSON: `{"dimensions": "r"}`, Tokens: `{"colors": "tk"}`, SpecText: "# spec text",
		SpecJSON:   `{"targets": [{"component_contracts": [{"expects": "a row per item"}], "a11y_contract": ["row.item.*"]}]}`,
		GateResult: `{"gates": {"token_contrast": "pass"}, "all_green": true}`, Probe: `{"id": "row.item.1"}`,
		Render: img, Reference: img, Previous: &img}
	msgs := Messages(in)
	text := judgetest.UserText(msgs)
	for label, content := range map[string]string{
		"RUBRIC": in.RubricJSON, "TOKENS": in.Tokens, "SPEC TEXT": in.SpecText, "SPEC JSON": in.SpecJSON,
		"GATE RESULT": in.GateResult, "PROBE": in.Probe,
	} {
		begin := strings.Index(text, "-----BEGIN "+label)
		end := strings.Index(text, "-----END "+label+" nonce=")
		at := strings.Index(text, content)
		if begin < 0 || end < begin || at < begin || at > end {
			t.Errorf("%s is not fenced in the prompt", label)
		}
	}
	images := 0
	for _, p := range msgs[1].Parts {
		if p.Image != nil {
			images++
		}
	}
	if images != 3 || !strings.Contains(text, `reference source "candidate"`) {
		t.Errorf("%d images (want render, reference, previous); reference source named: %v", images, strings.Contains(text, "candidate"))
	}
	if !strings.Contains(template.Text, "gate result") || !strings.Contains(template.Text, "a11y contract") {
		t.Error("the instructions do not say how to use the gate result and spec.json's contract")
	}
}
