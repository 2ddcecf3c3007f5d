package verdicts

import (
	"math"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind"
)

func f(v float64) *float64 { return &v }
func q(v int) *int         { return &v }

// The quickstart's rows as results.json has them, graded.
var quickstart = []kind.Row{
	{ACID: "AC-1", Kind: "ab", Status: "compared", Winner: "reference", Confidence: f(1), Tag: "block"},
	{ACID: "AC-2", Kind: "ab", Status: "compared", Winner: "reference", Confidence: f(0.8), Tag: "fix"},
	{ACID: "AC-3", Kind: "ab", Status: "compared", Winner: "tie", Confidence: f(0.5), Tag: "polish"},
	{ACID: "AC-7", Kind: "ab", Status: "compared", Winner: "ours", Confidence: f(1)},
	{ACID: "AC-9", Kind: "ab", Status: "blocked", Reason: "unsupported artifact: video (.mp4)"},
	{ACID: "AC-11", Kind: "critic", Status: "compared", Verdict: "pass", Quality: q(8)},
	{ACID: "AC-12", Kind: "equivalence", Status: "compared", Verdict: "pass"},
}

func TestGradeOf(t *testing.T) {
	t.Parallel()
	want := []Grade{Block, Fix, Polish, Clean, Blocked, Clean, Clean}
	for i, r := range quickstart {
		if g := GradeOf(r); g != want[i] {
			t.Errorf("%s: grade %s, want %s", r.ACID, g, want[i])
		}
	}
	for _, tt := range []struct {
		row  kind.Row
		want Grade
	}{
		{kind.Row{Kind: "critic", Status: "compared", Verdict: "revise"}, Fix},
		{kind.Row{Kind: "critic", Status: "compared", Verdict: "reject"}, Block},
		{kind.Row{Kind: "equivalence", Status: "compared", Verdict: "fail"}, Block},
		{kind.Row{Kind: "rubric", Status: "signed_off"}, Clean},
		{kind.Row{Kind: "rubric", Status: "needs_fixes"}, Fix},
		{kind.Row{Kind: "rubric", Status: "budget_exhausted"}, Blocked},
		{kind.Row{Kind: "rubric", Status: "needs_context"}, Blocked},
		{kind.Row{Kind: "rubric", Status: "awaiting_spotcheck"}, SchemaViolation},
		{kind.Row{Kind: "ab", Status: "schema_violation"}, SchemaViolation},
		// Nothing a rule can classify is ever clean.
		{kind.Row{Kind: "ab", Status: "compared"}, SchemaViolation},
		{kind.Row{Kind: "critic", Status: "compared", Verdict: "maybe"}, SchemaViolation},
	} {
		if g := GradeOf(tt.row); g != tt.want {
			t.Errorf("%+v: grade %s, want %s", tt.row, g, tt.want)
		}
	}
}

func TestScoreOf(t *testing.T) {
	t.Parallel()
	want := []*float64{f(0), f(0.1), f(0.5), f(1), nil, f(0.8), f(1)}
	for i, r := range quickstart {
		got := ScoreOf(r)
		if (got == nil) != (want[i] == nil) || got != nil && math.Abs(*got-*want[i]) > 1e-9 {
			t.Errorf("%s: score %v, want %v", r.ACID, got, want[i])
		}
	}
}

func TestPolicyExitCode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		list []string
		want int
	}{
		{nil, 7}, // the batch's own code, whatever it is
		{[]string{"block"}, 1},
		{[]string{"schema_violation"}, 0},
		{[]string{"none"}, 0},
		{[]string{"blocked"}, 1},
		{[]string{"findings", "blocked", "schema-violation"}, 1},
	} {
		p, err := ParsePolicy(tt.list)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.ExitCode(quickstart, 7); got != tt.want {
			t.Errorf("--fail-on %v: exit %d, want %d", tt.list, got, tt.want)
		}
	}
	// Every AC blocked and blocked failing: the seed's 4.
	p, _ := ParsePolicy([]string{"blocked"})
	if got := p.ExitCode([]kind.Row{{Kind: "ab", Status: "blocked"}}, 0); got != 4 {
		t.Errorf("all blocked: exit %d, want 4", got)
	}
	p, _ = ParsePolicy([]string{"schema_violation"})
	if got := p.ExitCode([]kind.Row{{Kind: "ab", Status: "schema_violation"}, quickstart[0]}, 0); got != 3 {
		t.Errorf("schema violation: exit %d, want 3", got)
	}
	if _, err := ParsePolicy([]string{"blok"}); err == nil {
		t.Error("--fail-on blok accepted")
	}
	if _, err := ParsePolicy([]string{"clean"}); err == nil {
		t.Error("--fail-on clean accepted")
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	next := append([]kind.Row(nil), quickstart...)
	// AC-7: ours lost (clean to block); AC-1: block to ours (improved); AC-2's confidence
	// moved within fix; AC-12 is gone and AC-13 new.
	next[3] = kind.Row{ACID: "AC-7", Kind: "ab", Status: "compared", Winner: "reference", Confidence: f(0.95), Tag: "block"}
	next[0] = kind.Row{ACID: "AC-1", Kind: "ab", Status: "compared", Winner: "ours", Confidence: f(0.9)}
	next[1].Confidence = f(0.85)
	next = append(next[:6], kind.Row{ACID: "AC-13", Kind: "critic", Status: "compared", Verdict: "revise", Quality: q(5)})
	c := Compare(quickstart, next)
	if c.Counts != (Counts{Regressed: 1, Improved: 1, Unchanged: 4, Added: 1, Removed: 1}) {
		t.Fatalf("counts %+v", c.Counts)
	}
	reg := c.Of(Regressed)
	if len(reg) != 1 || reg[0].ACID != "AC-7" || reg[0].Base.Grade != Clean || reg[0].New.Grade != Block ||
		*reg[0].Base.Score != 1 || math.Abs(*reg[0].New.Score-0.025) > 1e-9 {
		t.Fatalf("regressions %+v", reg)
	}
	var ac2 Entry
	for _, e := range c.Entries {
		if e.ACID == "AC-2" {
			ac2 = e
		}
	}
	if ac2.Change != Unchanged || !ac2.Moved() {
		t.Errorf("AC-2 %+v: want unchanged but moved", ac2)
	}
	if got := c.Entries[len(c.Entries)-1]; got.ACID != "AC-12" || got.Change != Removed || got.New != nil {
		t.Errorf("last entry %+v, want AC-12 removed", got)
	}
	// The policy says which regressions fail: block is one, a fix-only policy lets it by.
	if n := len(c.Failing(Policy{})); n != 1 {
		t.Errorf("zero policy: %d failing", n)
	}
	fixOnly, _ := ParsePolicy([]string{"fix"})
	if n := len(c.Failing(fixOnly)); n != 0 {
		t.Errorf("--fail-on fix: %d failing, want 0", n)
	}
}
