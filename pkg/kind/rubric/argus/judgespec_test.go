package argus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJudgeSpec: the judge reads spec.json (the seed's judge inputs: "spec.json — the
// machine contract for the feature/target (states, a11y_contract, references)") for its
// contract, and never a file path (tribunal's founding invariant): the seed template's
// tokens and contrast-pairs paths, its route and its reference file are left out, every
// contract it scores against stays.
func TestJudgeSpec(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "seed-template", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := JudgeSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, gone := range []string{"argus/specs/example/tokens.json", "contrast-pairs.json", "http://localhost:3000/example", "references/list-populated-dark.png", `"route"`, `"file"`, `"design_system"`} {
		if strings.Contains(text, gone) {
			t.Errorf("the judge's spec.json holds %s", gone)
		}
	}
	var got struct {
		Feature string `json:"feature"`
		Targets []struct {
			ID                 string              `json:"id"`
			States             []string            `json:"states"`
			Appearances        []string            `json:"appearances"`
			A11yContract       []string            `json:"a11y_contract"`
			ComponentContracts []map[string]string `json:"component_contracts"`
			References         []map[string]string `json:"references"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	tg := got.Targets[0]
	if got.Feature != "example" || tg.ID != "list" || len(tg.States) != 2 || len(tg.Appearances) != 2 || len(tg.A11yContract) != 4 ||
		len(tg.ComponentContracts) != 2 || !strings.Contains(tg.ComponentContracts[0]["expects"], "primary action button") ||
		len(tg.References) != 1 || tg.References[0]["status"] != "needed" || tg.References[0]["source"] != "human" {
		t.Fatalf("contract lost: %s", text)
	}
}
