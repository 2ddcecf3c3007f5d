package batch

import (
	"errors"
	"strings"
	"testing"
)

// TestEntryProblemsSayWhereAndWhat: a problem inside an AC entry names the AC, the line
// and what is wrong, with the key the author probably meant; issue 17's example.
func TestEntryProblemsSayWhereAndWhat(t *testing.T) {
	t.Parallel()
	doc := `version: 1
name: typos
acs:
  - id: AC-0
    ours: o.md
    reference: r.md
  - id: AC-1
    ours: o.md
    reference: r.md
    criterian: The page says what it is for.
  - id: AC-2
    kind: equivalence
    original: a.md
    candidate: b.md
    cases:
      - id: c1
        inpt: hello
        tag: happy
  - id: AC-3
    colour: red
    positons: swap
  - kind: critic
    taks: summarise
`
	b, err := Parse("b/batch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"AC-0": "",
		"AC-1": "AC-1: line 10: unknown key criterian (did you mean criterion?)",
		"AC-2": "AC-2: line 16: cases[0]: missing key input; line 17: cases[0]: unknown key inpt (did you mean input?)",
		"AC-3": "AC-3: line 20: unknown key colour; line 21: unknown key positons (did you mean positions?)",
	}
	if len(b.ACs) != len(want) {
		t.Fatalf("ACs %+v", b.ACs)
	}
	for _, ac := range b.ACs {
		if ac.Problem() != want[ac.ID] {
			t.Errorf("%s: Problem\n  %q\nwant\n  %q", ac.ID, ac.Problem(), want[ac.ID])
		}
	}
	// An entry without an id is named by its place.
	if len(b.Rejected) != 1 || !strings.Contains(b.Rejected[0].Error(), "acs[4]: line 22: missing key id; line 23: unknown key taks (did you mean task?)") {
		t.Errorf("Rejected %v", b.Rejected)
	}
}

// TestHeaderTypoSuggestsTheKey: an unknown top-level key also names the key it is
// probably a typo of.
func TestHeaderTypoSuggestsTheKey(t *testing.T) {
	t.Parallel()
	_, err := Parse("b.yaml", []byte("version: 1\ntreshold: 0.5\nacs:\n  - id: AC-1\n"))
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Error() != "b.yaml:2: treshold: unknown key (did you mean threshold?)" {
		t.Fatalf("err %v", err)
	}
}
