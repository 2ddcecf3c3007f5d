package batch_test

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	criticstages "github.com/tribunal-dev/tribunal/pkg/kind/critic/stages"
	equivalencestages "github.com/tribunal-dev/tribunal/pkg/kind/equivalence/stages"
	rubricstages "github.com/tribunal-dev/tribunal/pkg/kind/rubric/stages"

	// The batch tests read entries of every kind that ships: the registry hands the kinds'
	// keys to the batch format when it starts (batch.SetKinds), as it does in tribunal.
	_ "github.com/tribunal-dev/tribunal/pkg/registry"
)

// TestKindKeysDecodeIntoTheKind: an entry's keys of its kind's own are decoded into the
// kind's struct (AC.Part), the batch's into the kind's defaults (Batch.Part), and a key of
// another kind is an unknown key, suggested among the common keys and the entry's kind's.
func TestKindKeysDecodeIntoTheKind(t *testing.T) {
	doc := `version: 1
min_cases: 3
runner_model: small
argus_runs: true
acs:
  - id: C-1
    kind: critic
    task: summarize
    output_file: out.md
  - id: E-1
    kind: equivalence
    original: a.md
    candidate: b.md
    cases: [{id: c1, input: hi, tag: happy}]
  - id: R-1
    kind: rubric
    spec: spec.json
    mode: report-only
  - id: A-1
    criterion: clear
    task: summarize
  - id: C-2
    kind: critic
    outptu: x
  - id: A-2
    outptu: x
`
	b, err := batch.Parse("b/batch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]batch.AC{}
	for _, ac := range b.ACs {
		byID[ac.ID] = ac
	}
	if e, ok := byID["C-1"].Part.(*criticstages.Entry); !ok || e.Task != "summarize" || e.OutputFile != "out.md" {
		t.Errorf("C-1 part %#v", byID["C-1"].Part)
	}
	if e, ok := byID["E-1"].Part.(*equivalencestages.Entry); !ok || e.Original != "a.md" || len(e.Cases) != 1 || e.Cases[0].Tag != "happy" {
		t.Errorf("E-1 part %#v", byID["E-1"].Part)
	}
	if e, ok := byID["R-1"].Part.(*rubricstages.Entry); !ok || e.Spec != "spec.json" || byID["R-1"].ModeOf() != "report-only" {
		t.Errorf("R-1 part %#v", byID["R-1"].Part)
	}
	if d, ok := b.Part("equivalence").(*equivalencestages.Defaults); !ok || d.MinCases != 3 || d.RunnerModel != "small" {
		t.Errorf("equivalence defaults %#v", b.Part("equivalence"))
	}
	if d, ok := b.Part("rubric").(*rubricstages.Defaults); !ok || !d.ArgusRuns {
		t.Errorf("rubric defaults %#v", b.Part("rubric"))
	}
	if got := strings.Join(byID["C-1"].Artifacts(), ","); got != "out.md" {
		t.Errorf("C-1 artifacts %q", got)
	}
	if !byID["E-1"].Sets("candidate") || byID["E-1"].Sets("runner_model") || !byID["C-1"].Sets("kind") {
		t.Error("Sets does not report the entry's keys")
	}
	for id, want := range map[string]string{
		"A-1": "A-1: line 21: unknown key task",
		"C-2": "C-2: line 24: unknown key outptu (did you mean output?)",
		"A-2": "A-2: line 26: unknown key outptu",
	} {
		if got := byID[id].Problem(); got != want {
			t.Errorf("%s: problem %q, want %q", id, got, want)
		}
		if byID[id].Part != nil {
			t.Errorf("%s: an entry with a problem has a part %#v", id, byID[id].Part)
		}
	}
}

// TestSetKindsRefusesACommonKey: a kind cannot take a key every entry has.
func TestSetKindsRefusesACommonKey(t *testing.T) {
	err := batch.SetKinds([]batch.KindKeys{{Name: "x", Keys: batch.Keys{Schema: []byte(`{"entry": {"criterion": {"type": "string"}}}`)}}})
	if err == nil || !strings.Contains(err.Error(), "criterion is a common key") {
		t.Fatalf("err %v", err)
	}
}

// TestParseAutoSwap: positions auto with its auto_swap rule, at the top and per AC; the
// rule, the threshold and positions are ab's batch keys (Batch.Part, AC.Part).
func TestParseAutoSwap(t *testing.T) {
	t.Parallel()
	b, err := batch.Parse("b.yaml", []byte("version: 1\nthreshold: 0.8\npositions: auto\nauto_swap: {confidence: 0.85, flip_rate: 0.05}\nacs:\n  - {id: AC-1, positions: auto}\n  - {id: AC-2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := b.Part("ab").(*ab.Defaults)
	if !ok || d.Threshold == nil || *d.Threshold != 0.8 {
		t.Errorf("ab defaults %#v", b.Part("ab"))
	}
	e, _ := b.ACs[0].Part.(*ab.Entry)
	if a := abAutoSwap(b); !ok || d.Positions != "auto" || a == nil || *a.Confidence != 0.85 || *a.FlipRate != 0.05 || e == nil || e.Positions != "auto" {
		t.Errorf("ab defaults %+v auto_swap %+v AC %+v", d, a, e)
	}
	b, err = batch.Parse("b.yaml", []byte("version: 1\nauto_swap: {flip_rate: 0.2}\nacs:\n  - {id: AC-1, positions: auto}\n"))
	if a := abAutoSwap(b); err != nil || a == nil || a.Confidence != nil || *a.FlipRate != 0.2 {
		t.Errorf("partial auto_swap %+v %v", a, err)
	}
}

// abAutoSwap is b's auto_swap, nil when it sets none.
func abAutoSwap(b *batch.Batch) *ab.AutoSwap {
	if d, ok := b.Part("ab").(*ab.Defaults); ok {
		return d.AutoSwap
	}
	return nil
}

// TestPositionsIsAbs: positions is ab's key, at the top (the default of the batch's ab
// entries, in a batch of several kinds too) and per entry; on an entry of another kind,
// which would not read it, it is an unknown key rather than silently ignored.
func TestPositionsIsAbs(t *testing.T) {
	t.Parallel()
	b, err := batch.Parse("b.yaml", []byte("version: 1\npositions: swap\nacs:\n"+
		"  - {id: A-1, criterion: c, ours: o.md, reference: r.md}\n"+
		"  - {id: C-1, kind: critic, task: t, output: o}\n"+
		"  - {id: C-2, kind: critic, task: t, output: o, positions: swap}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := b.Part("ab").(*ab.Defaults); !ok || d.Positions != "swap" {
		t.Errorf("ab defaults %#v", b.Part("ab"))
	}
	for i, want := range []string{"", "", "C-2: line 6: unknown key positions"} {
		if got := b.ACs[i].Problem(); got != want {
			t.Errorf("%s: problem %q, want %q", b.ACs[i].ID, got, want)
		}
	}
}
