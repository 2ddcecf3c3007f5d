package spend_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

func abSpec(positions string, judges ...string) events.JobSpec {
	return events.JobSpec{Kind: events.KindAB, ACID: "AC-7", KindPart: &ab.Spec{Positions: positions, Judges: judges}}
}

// The zero policy is a shared deployment's: the default model only, by leaving judges
// empty or by naming it, and the default cap.
func TestZeroPolicyAllowsOnlyTheDefault(t *testing.T) {
	a := spend.Policy{Default: "gpt-4o-mini"}.For("team-a")
	if a.MaxCallsPerAC != spend.DefaultMaxCallsPerAC || a.AnyModel {
		t.Fatalf("allowance %+v", a)
	}
	for _, m := range []string{"", "gpt-4o-mini"} {
		if !a.Allows(m) {
			t.Errorf("the default %q is refused", m)
		}
	}
	if err := a.CheckSpec(abSpec("single")); err != nil {
		t.Errorf("an empty panel: %v", err)
	}
	err := a.CheckSpec(abSpec("single", "gpt-4o-mini", "o1-pro"))
	var r *spend.Refusal
	if !errors.As(err, &r) || r.Reason != spend.ReasonModel || r.Model != "o1-pro" || r.Field != "ab.judges[1]" || r.Index != 1 || r.Part != spend.PartJudges {
		t.Fatalf("refusal %#v", err)
	}
	want := `ab.judges[1]: model "o1-pro" is not allowed on this deployment (allowed: gpt-4o-mini (the default))`
	if err.Error() != want {
		t.Errorf("message\n %s\nwant\n %s", err, want)
	}
	if got := r.At("acs[3].judges[1]"); !strings.HasPrefix(got, `acs[3].judges[1]: model "o1-pro"`) {
		t.Errorf("At: %s", got)
	}

	// A checker that does not know the default (a direct submitter) says how to get it.
	none := spend.Policy{}.For("team-a")
	if err := none.CheckSpec(abSpec("single", "gpt-4o")); err == nil || !strings.Contains(err.Error(), "none by name: leave judges empty") {
		t.Errorf("no default known: %v", err)
	}
}

func TestListsAndTenants(t *testing.T) {
	p := spend.Policy{Models: []string{"gpt-4o", "llama3:8b"}, Default: "gpt-4o-mini",
		Tenants: map[string][]string{"team-a": {"o1-mini"}, "team-c": {spend.AnyModel}}}
	cases := []struct {
		tenant, model string
		ok            bool
	}{
		{"team-b", "gpt-4o", true}, {"team-b", "llama3:8b", true}, {"team-b", "gpt-4o-mini", true},
		{"team-b", "o1-mini", false}, {"team-b", "GPT-4o", false}, {"team-b", "gpt-4o ", false},
		// A team's own list replaces the deployment's; the default stays.
		{"team-a", "o1-mini", true}, {"team-a", "gpt-4o", false}, {"team-a", "gpt-4o-mini", true},
		{"team-c", "ft:gpt-4o:acme:x", true},
	}
	for _, c := range cases {
		if got := p.For(c.tenant).Allows(c.model); got != c.ok {
			t.Errorf("%s may name %q: %v, want %v", c.tenant, c.model, got, c.ok)
		}
	}
	if got := p.For("team-b").Models; !reflect.DeepEqual(got, []string{"gpt-4o", "gpt-4o-mini", "llama3:8b"}) {
		t.Errorf("team-b's models %v", got)
	}
	// Runner models are models too.
	eq := events.JobSpec{Kind: events.KindEquivalence, ACID: "E-1", KindPart: &equivalence.Spec{RunnerModel: "o1-pro"}}
	rs := p.For("team-b").Check(eq)
	if len(rs) != 1 || rs[0].Field != "equivalence.runner_model" || rs[0].Part != spend.PartRunnerModel {
		t.Fatalf("runner model: %v", rs)
	}
	if rs := p.For("team-c").Check(eq); len(rs) != 0 {
		t.Errorf("any model: %v", rs)
	}
}

func TestCallsPerAC(t *testing.T) {
	for _, c := range []struct {
		models    int
		positions string
		want      int
	}{{0, "", 2}, {1, "single", 2}, {1, "swap", 4}, {4, "swap", 16}, {4, "auto", 16}, {64, "swap", 256}, {5, "single", 10}} {
		if got := spend.Calls(c.models, c.positions); got != c.want {
			t.Errorf("Calls(%d, %q) = %d, want %d", c.models, c.positions, got, c.want)
		}
	}
	open := spend.Policy{Models: []string{spend.AnyModel}}.For("t")
	four := abSpec("swap", "m1", "m2", "m3", "m4")
	if err := open.CheckSpec(four); err != nil {
		t.Errorf("four models swapped fit the default cap: %v", err)
	}
	five := abSpec("swap", "m1", "m2", "m3", "m4", "m5")
	err := open.CheckSpec(five)
	want := "AC-7 would make up to 20 judge calls (5 models × 2 orders × 2 with the repair re-ask); this deployment allows 16 per AC (--max-calls-per-ac)"
	var r *spend.Refusal
	if !errors.As(err, &r) || r.Reason != spend.ReasonCalls || err.Error() != want || r.Field != "ab.judges" {
		t.Fatalf("got %v, want %s", err, want)
	}
	if r.Value() != "5 models, positions swap" {
		t.Errorf("value %q", r.Value())
	}
	if err := (spend.Policy{Models: []string{spend.AnyModel}, MaxCallsPerAC: -1}).For("t").CheckSpec(five); err != nil {
		t.Errorf("no cap: %v", err)
	}
	if err := spend.Open().For("t").CheckSpec(abSpec("swap", make([]string, 64)...)); err != nil {
		t.Errorf("the open policy: %v", err)
	}
	// Every problem of a spec, in order: each model, then the calls.
	many := make([]string, 9)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	rs := spend.Policy{Models: []string{"m0"}}.For("t").Check(abSpec("single", many...))
	if len(rs) != 9 || rs[0].Model != "m1" || rs[8].Reason != spend.ReasonCalls {
		t.Fatalf("refusals %v", rs)
	}
}

// The judge service's check: a rejudge's model, a panel from an old event.
func TestCheckGates(t *testing.T) {
	a := spend.Policy{Default: "gpt-4o-mini", Models: []string{"gpt-4o"}}.For("team-a")
	if err := a.CheckGates("AC-1", &events.GatesDone{Kind: events.KindCritic}); err != nil {
		t.Errorf("the default model: %v", err)
	}
	err := a.CheckGates("AC-1", &events.GatesDone{Kind: events.KindAB, Judges: []string{"gpt-4o", "o1-pro"}})
	if err == nil || !strings.HasPrefix(err.Error(), `judges[1]: model "o1-pro" is not allowed`) {
		t.Errorf("model: %v", err)
	}
	err = a.CheckGates("AC-1", &events.GatesDone{Kind: events.KindAB, Positions: "swap", Judges: []string{"gpt-4o", "gpt-4o", "gpt-4o", "gpt-4o", "gpt-4o"}})
	if err == nil || !strings.HasPrefix(err.Error(), "AC-1 would make up to 20 judge calls") {
		t.Errorf("calls: %v", err)
	}
}

func TestParseTenantModels(t *testing.T) {
	got, err := spend.ParseTenantModels([]string{"team-a=gpt-4o", "gpt-4o-mini", " team-b = llama3:8b ", "team-c="})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"team-a": {"gpt-4o", "gpt-4o-mini"}, "team-b": {"llama3:8b"}, "team-c": {}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range [][]string{{"gpt-4o"}, {"Team A=gpt-4o"}, {"team-a=x", "team-a=y"}, {"dlq=gpt-4o"}} {
		if _, err := spend.ParseTenantModels(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := (spend.Policy{Models: []string{"gpt-4o", ""}}).Validate(); err == nil {
		t.Error("an empty model name accepted")
	}
	if err := (spend.Policy{Tenants: map[string][]string{"no such team!": {"x"}}}).Validate(); err == nil {
		t.Error("an invalid team name accepted")
	}
}

// TestTrialsCountAgainstTheCap: every trial asks the whole panel again, and a ladder's
// every rung may be asked, so both count against the calls an AC may make.
func TestTrialsCountAgainstTheCap(t *testing.T) {
	a := spend.Allowance{AnyModel: true, MaxCallsPerAC: 16}
	gd := &events.GatesDone{Kind: events.KindAB, Judges: []string{"m1", "m2"}, Positions: events.PositionsSwap}
	if err := a.CheckGates("AC-1", gd); err != nil {
		t.Fatalf("2 models × 2 orders × 2: %v", err)
	}
	gd.Repeats = &events.Repeats{Trials: 3}
	err := a.CheckGates("AC-1", gd)
	if err == nil || !strings.Contains(err.Error(), "up to 24 judge calls") || !strings.Contains(err.Error(), "× 3 trials") {
		t.Fatalf("three trials: %v", err)
	}
	ladder := &events.GatesDone{Kind: events.KindAB, Positions: events.PositionsSwap, Repeats: &events.Repeats{Trials: 3, Ladder: []string{"cheap", "strong"}}}
	if err := a.CheckGates("AC-1", ladder); err == nil || !strings.Contains(err.Error(), "up to 24 judge calls") {
		t.Fatalf("a two-rung ladder with three trials: %v", err)
	}
	named := spend.Allowance{Models: []string{"cheap"}, MaxCallsPerAC: 64}
	if err := named.CheckGates("AC-1", ladder); err == nil || !strings.Contains(err.Error(), "repeats.ladder[1]") {
		t.Fatalf("a rung the team may not name: %v", err)
	}
}
