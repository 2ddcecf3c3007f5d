// Package spend is what an operator lets a team spend on the judge provider: which models
// a batch may name (an ab panel's `judges:`, an equivalence `runner_model`) and how many
// judge calls one AC may make. Left to the batch, both are the team's choice: one AC
// naming 64 models with `positions: swap` made 129 provider requests across 65 model
// names, among them o1-pro and a fine-tuned model id (issue 23).
//
// The rules are checked where a batch enters (the ingress for teams; the client, before
// anything is published, for direct submissions) and again where the provider is called
// (the judge service, and the renderer, which runs equivalence documents), which an
// operator's direct submission or an event published before the rules existed reaches
// without passing an entry. Every one of those places calls the checks of this package,
// so they cannot disagree about what is allowed.
package spend

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// AnyModel, in a list of models, allows every model. It is the all-in-one run's default
// (one trusted user spending its own key); on a shared deployment it is an operator's
// explicit choice, never what an empty list means.
const AnyModel = "*"

// DefaultMaxCallsPerAC is the cap of a shared deployment that sets none: a panel of four
// models judging both orders, each call with its repair re-ask, fits; a panel of 64 does
// not.
const DefaultMaxCallsPerAC = 16

// Refusal reasons: fixed words, the reason label of tribunal_refusals_total.
const (
	// ReasonModel is a model the team may not name.
	ReasonModel = "model_not_allowed"
	// ReasonCalls is an AC that would make more judge calls than the cap.
	ReasonCalls = "too_many_calls"
)

// Parts of a spec a Refusal can be about, for callers that name fields their own way.
const (
	PartJudges      = "judges"
	PartRunnerModel = "runner_model"
)

// Policy is a deployment's rules, as its operator configures them. The zero value is the
// safe one for a shared deployment: only the judge service's default model, at most
// DefaultMaxCallsPerAC calls per AC.
type Policy struct {
	// Models are the models every team may name. AnyModel allows every model. Empty
	// allows only Default: a team leaves `judges:` empty and gets the deployment's model.
	Models []string
	// Tenants gives a team a list of its own, in place of Models (wider or narrower).
	Tenants map[string][]string
	// Default is the deployment's judge model, what an empty `judges:` asks for: always
	// allowed, since refusing it by name while granting it by omission would protect
	// nothing. "" when the checking process does not know it (a direct submitter).
	Default string
	// MaxCallsPerAC bounds the judge calls of one AC (Calls). 0 takes
	// DefaultMaxCallsPerAC; a negative value sets no bound.
	MaxCallsPerAC int
}

// Open is the policy of a process with one trusted user who pays for its own key
// (`tribunal run`): any model, no cap.
func Open() Policy { return Policy{Models: []string{AnyModel}, MaxCallsPerAC: -1} }

// For is what tenant may spend under the policy.
func (p Policy) For(tenant string) Allowance {
	list, own := p.Tenants[tenant]
	if !own {
		list = p.Models
	}
	a := Allowance{Default: p.Default}
	switch {
	case p.MaxCallsPerAC == 0:
		a.MaxCallsPerAC = DefaultMaxCallsPerAC
	case p.MaxCallsPerAC > 0:
		a.MaxCallsPerAC = p.MaxCallsPerAC
	}
	for _, m := range list {
		if m == AnyModel {
			a.AnyModel = true
			continue
		}
		a.Models = append(a.Models, m)
	}
	if p.Default != "" {
		a.Models = append(a.Models, p.Default)
	}
	slices.Sort(a.Models)
	a.Models = slices.Compact(a.Models)
	return a
}

// Allowance is what one team may spend: the form every check takes, and what the
// ingress tells a team's client (GET /v1/whoami), so the client refuses a batch the
// ingress would refuse before publishing any of it.
type Allowance struct {
	// Models are the models the team may name, sorted; the default among them when known.
	Models []string `json:"models,omitempty"`
	// AnyModel allows every model.
	AnyModel bool `json:"any_model,omitempty"`
	// Default is the deployment's judge model, "" when the checker does not know it.
	Default string `json:"default_model,omitempty"`
	// MaxCallsPerAC bounds Calls of one AC; 0 sets no bound.
	MaxCallsPerAC int `json:"max_calls_per_ac,omitempty"`
}

// Allows reports whether the team may name model. "" is the default model, which an
// empty `judges:` asks for and every team may use.
func (a Allowance) Allows(model string) bool {
	if model == "" || a.AnyModel {
		return true
	}
	_, found := slices.BinarySearch(a.Models, model)
	return found
}

// Calls is the most judge calls one judging of an AC makes: every model of its panel (an
// empty panel is the default model), in each order it is shown (two with positions swap
// or auto), each call with its repair re-asks.
func Calls(models int, positions string) int {
	return max(models, 1) * orders(positions) * (1 + judge.RepairReAsks)
}

// TrialCalls is Calls asked trials times (`trials:`): every trial asks the whole panel
// again. A ladder's rungs count as its panel, every rung asked in the worst case.
func TrialCalls(models int, positions string, trials int) int {
	return Calls(models, positions) * max(trials, 1)
}

func orders(positions string) int {
	if positions == events.PositionsSwap || positions == events.PositionsAuto {
		return 2
	}
	return 1
}

// Refusal is one thing a job may not spend. Its Error names the field as the spec's wire
// form does; At names it as the caller's document does (the client names the batch
// file's field).
type Refusal struct {
	// Reason is ReasonModel or ReasonCalls.
	Reason string
	// Field is where, in the job's spec as the wire names it: "ab.judges[2]",
	// "equivalence.runner_model", or "ab.judges" for a panel's calls.
	Field string
	// Part is PartJudges or PartRunnerModel, and Index the entry of judges a model
	// refusal is about: the same place, for a caller naming fields its own way.
	Part  string
	Index int
	// Model is the refused model (ReasonModel).
	Model string
	// AC, Calls, Models and Positions describe a refused panel (ReasonCalls), Max the cap.
	AC        string
	Calls     int
	Models    int
	Positions string
	Max       int
	// Trials is how often the panel is asked (`trials:`), 0 or 1 for once.
	Trials int

	allowed string
}

// Error implements error.
func (r *Refusal) Error() string { return r.At(r.Field) }

// Is makes a refusal errclass.Refused: the same spec is refused again however often it is
// sent.
func (r *Refusal) Is(target error) bool { return target == errclass.Refused }

// At is the refusal's message with the field called field: `acs[3].judges[2]: model
// "o1-pro" is not allowed on this deployment (allowed: gpt-4o, gpt-4o-mini)`, or `AC-7
// would make up to 256 judge calls (64 models × 2 orders × 2 with the repair re-ask);
// this deployment allows 16 per AC (--max-calls-per-ac)`.
func (r *Refusal) At(field string) string {
	if r.Reason == ReasonCalls {
		return r.What()
	}
	return field + ": " + r.What()
}

// What is the message without the field.
func (r *Refusal) What() string {
	if r.Reason == ReasonCalls {
		trials := ""
		if r.Trials > 1 {
			trials = fmt.Sprintf(" × %d trials", r.Trials)
		}
		return fmt.Sprintf("%s would make up to %d judge calls (%s × %s × %d with the repair re-ask%s); this deployment allows %d per AC (--max-calls-per-ac)",
			cmp.Or(r.AC, "the AC"), r.Calls, plural(max(r.Models, 1), "model"), plural(orders(r.Positions), "order"), 1+judge.RepairReAsks, trials, r.Max)
	}
	return fmt.Sprintf("model %q is not allowed on this deployment (allowed: %s)", r.Model, r.allowed)
}

// Value is what was refused, as text: the model, or the panel's size.
func (r *Refusal) Value() string {
	if r.Reason == ReasonCalls {
		return fmt.Sprintf("%s, positions %s", plural(max(r.Models, 1), "model"), cmp.Or(r.Positions, events.PositionsSingle))
	}
	return r.Model
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// maxListed bounds the models a refusal lists: the message stays readable on a
// deployment that allows many.
const maxListed = 12

// allowedText says which models the team may name, for a refusal.
func (a Allowance) allowedText() string {
	if len(a.Models) == 0 {
		return "none by name: leave judges empty for the judge service's default model"
	}
	names := make([]string, 0, min(len(a.Models), maxListed)+1)
	for i, m := range a.Models {
		if i == maxListed {
			names = append(names, fmt.Sprintf("and %d more", len(a.Models)-maxListed))
			break
		}
		if m == a.Default {
			m += " (the default)"
		}
		names = append(names, m)
	}
	return strings.Join(names, ", ")
}

// CheckModel refuses a model the team may not name; field names where it was named.
func (a Allowance) CheckModel(field, part string, index int, model string) *Refusal {
	if a.Allows(model) {
		return nil
	}
	return &Refusal{Reason: ReasonModel, Field: field, Part: part, Index: index, Model: model, allowed: a.allowedText()}
}

// CheckCalls refuses a panel of models models judged in positions whose Calls exceed the
// cap; ac names the AC and field the panel, in messages.
//
// trials multiplies the panel's calls (TrialCalls).
func (a Allowance) CheckCalls(ac, field string, models int, positions string, trials int) *Refusal {
	n := TrialCalls(models, positions, trials)
	if a.MaxCallsPerAC <= 0 || n <= a.MaxCallsPerAC {
		return nil
	}
	return &Refusal{Reason: ReasonCalls, Field: field, Part: PartJudges, AC: ac, Calls: n, Models: models, Positions: positions, Max: a.MaxCallsPerAC, Trials: trials}
}

// Ask is what a job asks of a team's allowance, as its kind reads its spec
// (kind.Spending): the models it names, each by the field that names it, and the panel
// whose calls count against the cap.
type Ask struct {
	Models []ModelAsk
	Panel  *PanelAsk
}

// ModelAsk is one model a job's spec names: Field as its wire form names it
// ("ab.judges[1]", "equivalence.runner_model"), Part and Index as a Refusal reports them.
type ModelAsk struct {
	Field string
	Part  string
	Index int
	Model string
}

// PanelAsk is a panel of Models models judged in Positions, named by Field.
type PanelAsk struct {
	Field     string
	Models    int
	Positions string
}

// asker reads a job's Ask from its spec; the registry of kinds sets it at start
// (SetAsker), as this package knows no kind's spec.
var asker atomic.Pointer[func(events.JobSpec) Ask]

// SetAsker sets how a job's Ask is read from its spec: the registry of kinds (pkg/registry)
// sets it to ask the spec's kind (kind.Spending) when the program starts. Before it is
// set, a spec asks for nothing beyond the service's own model.
func SetAsker(f func(events.JobSpec) Ask) { asker.Store(&f) }

// Check lists everything a job's spec may not spend, fields named as its wire form names
// them: every model it names that the team may not name (an ab panel's, an equivalence
// runner's), a panel's calls beyond the cap. An empty list means the job may be judged.
func (a Allowance) Check(spec events.JobSpec) []*Refusal {
	var ask Ask
	if f := asker.Load(); f != nil {
		ask = (*f)(spec)
	}
	var out []*Refusal
	for _, m := range ask.Models {
		if r := a.CheckModel(m.Field, m.Part, m.Index, m.Model); r != nil {
			out = append(out, r)
		}
	}
	if p := ask.Panel; p != nil {
		if r := a.CheckCalls(spec.ACID, p.Field, p.Models, p.Positions, spec.Repeats.K()); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// CheckSpec is Check's first refusal as an error (a *Refusal), nil when there is none.
func (a Allowance) CheckSpec(spec events.JobSpec) error {
	if rs := a.Check(spec); len(rs) > 0 {
		return rs[0]
	}
	return nil
}

// CheckGates refuses a gated job (of any kind) the judge service must not judge for the
// team: a model its judges name that the team may not name, or more calls than the cap.
// ac names the job in messages.
func (a Allowance) CheckGates(ac string, gd *events.GatesDone) error {
	for i, m := range gd.Judges {
		if r := a.CheckModel(fmt.Sprintf("judges[%d]", i), PartJudges, i, m); r != nil {
			return r
		}
	}
	models := len(gd.Judges)
	if rep := gd.Repeats; rep != nil && len(rep.Ladder) > 0 {
		// Every rung of a ladder may be asked: each is a model the team must be allowed.
		for i, m := range rep.Ladder {
			if r := a.CheckModel(fmt.Sprintf("repeats.ladder[%d]", i), PartJudges, i, m); r != nil {
				return r
			}
		}
		models = len(rep.Ladder)
	}
	if r := a.CheckCalls(ac, "judges", models, gd.Positions, gd.Repeats.K()); r != nil {
		return r
	}
	return nil
}

// ParseTenantModels reads teams' own model lists as `--tenant-models` takes them, a list
// whose every "team=model" entry starts a team's list and every plain entry continues
// the list before it: "team-a=gpt-4o,gpt-4o-mini,team-b=llama3". The one form serves the
// repeated flag and the comma-separated environment variable alike. A team named twice
// is refused, since one of its two lists would silently lose.
func ParseTenantModels(entries []string) (map[string][]string, error) {
	out := map[string][]string{}
	team := ""
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		model := e
		if t, m, ok := strings.Cut(e, "="); ok {
			t = strings.TrimSpace(t)
			if err := events.ValidateTenant(t); err != nil {
				return nil, fmt.Errorf("tenant models %q: %w", e, err)
			}
			if _, dup := out[t]; dup {
				return nil, fmt.Errorf("tenant models: team %s is given two lists; give one", t)
			}
			team, model = t, strings.TrimSpace(m)
			out[team] = []string{}
		} else if team == "" {
			return nil, fmt.Errorf("tenant models %q: want team=model[,model...]", e)
		}
		if model != "" {
			out[team] = append(out[team], model)
		}
	}
	return out, nil
}

// Validate refuses a policy that names an empty model or a team name no tenant can have:
// a typo there would refuse, or allow, something other than what the operator meant.
func (p Policy) Validate() error {
	check := func(where string, models []string) error {
		for i, m := range models {
			if strings.TrimSpace(m) == "" || strings.TrimSpace(m) != m {
				return fmt.Errorf("%s[%d]: model %q: want a model name without surrounding spaces", where, i, m)
			}
		}
		return nil
	}
	if err := check("models", p.Models); err != nil {
		return err
	}
	for _, t := range slices.Sorted(maps.Keys(p.Tenants)) {
		if err := events.ValidateTenant(t); err != nil {
			return fmt.Errorf("tenant models: %w", err)
		}
		if err := check("tenant models of "+t, p.Tenants[t]); err != nil {
			return err
		}
	}
	return nil
}
