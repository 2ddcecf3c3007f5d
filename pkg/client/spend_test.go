package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/spend"
)

// TestPrepareRefusesWhatTheTeamMayNotSpend: a batch naming a model its team may not
// name, or a panel beyond the cap, is refused whole before anything is stored or
// published, every problem naming the field as the batch file has it: the batch's own
// judges once for all the ACs that use them, an AC's with its index in the acs list
// (skipped entries counted) and its line.
func TestPrepareRefusesWhatTheTeamMayNotSpend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"o.md": "# ours\n", "r.md": "# reference\n", "orig.md": "do a\n", "cand.md": "do a, briefly\n"})
	doc := `version: 1
judges: [gpt-4o, o1-pro]
acs:
  - {id: AC-1, criterion: c, ours: o.md, reference: r.md}
  - {criterion: an entry without an id, skipped}
  - {id: AC-3, criterion: c, ours: o.md, reference: r.md, judges: [gpt-4.5-preview, gpt-4o]}
  - {id: AC-4, criterion: c, ours: o.md, reference: r.md, positions: swap, judges: [gpt-4o, gpt-4o, gpt-4o, gpt-4o, gpt-4o]}
  - {id: AC-5, criterion: c, ours: o.md, reference: r.md}
  - {id: AC-6, kind: equivalence, original: orig.md, candidate: cand.md, runner_model: ft:gpt-4o:acme::x, cases: [{id: c1, input: hi, tag: happy}]}
`
	b := parseBatch(t, dir, doc)
	store := &countingStore{Store: tempStore(t)}
	s := &Submitter{Store: store, Spend: &spend.Allowance{Models: []string{"gpt-4o"}, MaxCallsPerAC: 16}}
	_, err := s.Prepare(context.Background(), b, "team-a")
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("want a refusal, got %v", err)
	}
	path := b.Path
	want := []string{
		path + `: judges[1]: model "o1-pro" is not allowed on this deployment (allowed: gpt-4o)`,
		path + `:6: acs[2].judges[0]: model "gpt-4.5-preview" is not allowed on this deployment (allowed: gpt-4o)`,
		path + `:7: AC-4 would make up to 20 judge calls (5 models × 2 orders × 2 with the repair re-ask); this deployment allows 16 per AC (--max-calls-per-ac)`,
		path + `:9: acs[5].runner_model: model "ft:gpt-4o:acme::x" is not allowed on this deployment (allowed: gpt-4o)`,
	}
	if strings.Join(re.Problems, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems\n%s\nwant\n%s", strings.Join(re.Problems, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(err.Error(), "refused, nothing was published") {
		t.Errorf("error %q", err)
	}
	// Refused before the plan was stored: nothing of the batch is in the store.
	if n := store.count(); n != 0 {
		t.Errorf("%d objects stored for a refused batch", n)
	}

	// Thousands of unlisted models make a readable refusal.
	var many strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&many, "m%d, ", i)
	}
	b = parseBatch(t, dir, "version: 1\nacs:\n  - {id: AC-1, criterion: c, ours: o.md, reference: r.md, judges: ["+many.String()+"]}\n")
	_, err = s.Prepare(context.Background(), b, "team-a")
	if !errors.As(err, &re) || len(re.Problems) != maxSpendProblems+1 || re.Problems[maxSpendProblems] != "and 2981 more" {
		t.Fatalf("%d problems, the last %q", len(re.Problems), re.Problems[len(re.Problems)-1])
	}

	// Without an allowance, and with an open one, the same batch is prepared.
	for _, a := range []*spend.Allowance{nil, {AnyModel: true}} {
		s := &Submitter{Store: tempStore(t), Spend: a}
		if _, err := s.Prepare(context.Background(), parseBatch(t, dir, doc), "team-a"); err != nil {
			t.Errorf("allowance %+v: %v", a, err)
		}
	}
}
