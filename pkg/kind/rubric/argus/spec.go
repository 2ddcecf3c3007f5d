package argus

import (
	"encoding/json"
	"fmt"
)

// Reference statuses of spec.json.
const (
	// RefPresent: the reference image exists and the view can be judged.
	RefPresent = "present"
	// RefNeeded: a human still has to supply or approve a reference.
	RefNeeded = "needed"
	// RefCandidate: an agent render waits for a human to approve it as the reference.
	RefCandidate = "candidate"
)

// Reference sources, recorded into sign-offs so a bootstrapped reference is never read
// as a designer's approval.
const (
	SourceHuman     = "human"
	SourceCandidate = "candidate"
)

// AdapterWeb is the built-in web sensor's adapter name: the only sensor that interprets
// a route (as a URL); any other adapter receives the route exactly as written.
const AdapterWeb = "web"

// DefaultAppearances is used for a target that lists none.
var DefaultAppearances = []string{"light"}

// Spec is a feature's machine contract, spec.json.
type Spec struct {
	// Feature is the feature's slug.
	Feature string `json:"feature"`
	// Adapter names the sensor and gates adapter ("web" is built in).
	Adapter string `json:"adapter"`
	// DesignSystem points at tokens.json and contrast-pairs.json.
	DesignSystem DesignSystem `json:"design_system"`
	// Targets are the screens the loop converges, one view at a time.
	Targets []Target `json:"targets"`
}

// DesignSystem points at the feature's design-system files: repository-relative paths,
// or paths relative to the feature folder (Feature.DesignPath).
type DesignSystem struct {
	// Tokens is the generated design-system mirror (required).
	Tokens string `json:"tokens"`
	// ContrastPairs declares the pairs of the token_contrast gate; without it the
	// gate is skipped.
	ContrastPairs string `json:"contrast_pairs,omitempty"`
}

// Target is one renderable screen of the feature.
type Target struct {
	// ID is the target's slug, unique in the spec.
	ID string `json:"id"`
	// Route tells the adapter how to reach the target (a URL, a path relative to the
	// feature folder, a deep link); the loop never interprets it.
	Route string `json:"route"`
	// States are the render states a fixture can produce.
	States []string `json:"states"`
	// Appearances to sign off; DefaultAppearances when empty.
	Appearances []string `json:"appearances,omitempty"`
	// Fixtures maps a state to the data fixture the sensor injects.
	Fixtures map[string]string `json:"fixtures,omitempty"`
	// Canonical picks the view that needs the reference image.
	Canonical *Canonical `json:"canonical,omitempty"`
	// A11yContract lists the element ids the probe must expose ('*' = prefix family).
	A11yContract []string `json:"a11y_contract,omitempty"`
	// References is the reference-image manifest.
	References []Reference `json:"references,omitempty"`
	// ComponentContracts are free-form per-state expectations the judge reads.
	ComponentContracts []json.RawMessage `json:"component_contracts,omitempty"`
}

// Canonical picks the one view of a target that needs a reference image; either field
// may be left out and then defaults to the first state or appearance.
type Canonical struct {
	// State and Appearance of the canonical view.
	State      string `json:"state,omitempty"`
	Appearance string `json:"appearance,omitempty"`
}

// Reference is one entry of a target's reference manifest.
type Reference struct {
	// State and Appearance name the view.
	State      string `json:"state"`
	Appearance string `json:"appearance"`
	// Status is present, needed or candidate.
	Status string `json:"status"`
	// Source is human or candidate (see EffectiveSource).
	Source string `json:"source,omitempty"`
	// File is the image, relative to the feature folder.
	File string `json:"file,omitempty"`
}

// EffectiveSource is the reference's source, SourceHuman when not recorded: the
// bootstrap flow always writes source "candidate" when it promotes an agent render, so
// an unmarked present reference was put there by a person.
func (r Reference) EffectiveSource() string {
	if r.Source == "" {
		return SourceHuman
	}
	return r.Source
}

// EffectiveAppearances is the target's appearances, DefaultAppearances when unset.
func (t Target) EffectiveAppearances() []string {
	if len(t.Appearances) == 0 {
		return append([]string(nil), DefaultAppearances...)
	}
	return t.Appearances
}

// CanonicalView returns the state and appearance that need the reference image:
// target.canonical where given, else the first state and the first appearance.
func (t Target) CanonicalView() (state, appearance string) {
	if len(t.States) > 0 {
		state = t.States[0]
	}
	appearance = t.EffectiveAppearances()[0]
	if t.Canonical != nil {
		if t.Canonical.State != "" {
			state = t.Canonical.State
		}
		if t.Canonical.Appearance != "" {
			appearance = t.Canonical.Appearance
		}
	}
	return state, appearance
}

// Fixture is the fixture the sensor injects for a state: fixtures[state], or the state
// name itself when the map does not list it (a harness that names fixtures after
// states needs no map).
func (t Target) Fixture(state string) string {
	if f, ok := t.Fixtures[state]; ok && f != "" {
		return f
	}
	return state
}

// ReferenceFor returns the manifest entry of one view.
func (t Target) ReferenceFor(state, appearance string) (Reference, bool) {
	for _, r := range t.References {
		if r.State == state && r.Appearance == appearance {
			return r, true
		}
	}
	return Reference{}, false
}

// CanonicalReference returns the canonical view's manifest entry. A canonical view
// without an entry reports status needed: the work a human has to do is the same.
func (t Target) CanonicalReference() Reference {
	s, a := t.CanonicalView()
	if r, ok := t.ReferenceFor(s, a); ok {
		return r
	}
	return Reference{State: s, Appearance: a, Status: RefNeeded}
}

// View is one (target, state, appearance) triple the loop converges separately.
type View struct {
	// Target, State and Appearance identify the view.
	Target     string `json:"target"`
	State      string `json:"state"`
	Appearance string `json:"appearance"`
	// Fixture is the data fixture the sensor injects for the state.
	Fixture string `json:"fixture"`
	// Canonical marks the view whose reference image anchors the whole target.
	Canonical bool `json:"canonical"`
}

// Key names the view as "target/state/appearance", the form loop state and sign-offs
// use for it.
func (v View) Key() string {
	return v.Target + "/" + v.State + "/" + v.Appearance
}

// Views expands the spec into target x states x appearances, targets in spec order,
// then states, then appearances.
func (s *Spec) Views() []View {
	var out []View
	for _, t := range s.Targets {
		out = append(out, t.Views()...)
	}
	return out
}

// Views expands one target into its states x appearances.
func (t Target) Views() []View {
	cs, ca := t.CanonicalView()
	var out []View
	for _, st := range t.States {
		for _, ap := range t.EffectiveAppearances() {
			out = append(out, View{
				Target: t.ID, State: st, Appearance: ap, Fixture: t.Fixture(st),
				Canonical: st == cs && ap == ca,
			})
		}
	}
	return out
}

// TargetByID finds a target.
func (s *Spec) TargetByID(id string) (Target, bool) {
	for _, t := range s.Targets {
		if t.ID == id {
			return t, true
		}
	}
	return Target{}, false
}

// ParseSpec checks spec.json's structure (see LintSpec; reference files are not looked
// up) and decodes it. Any lint error makes it fail with a *SpecError listing them all.
func ParseSpec(data []byte) (*Spec, error) {
	rep, err := LintSpec(data, nil)
	if err != nil {
		return nil, err
	}
	if !rep.Valid {
		return nil, &SpecError{Errors: rep.Errors}
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return &s, nil
}

// JudgeSpec is spec.json as the judge reads it: the machine contract it scores against
// (the seed gives the judge spec.json for its states, a11y contract, references and
// component contracts), without where anything lives. The design-system paths, the
// targets' routes and the reference files are left out, because a judge never receives
// file paths; the tokens and the reference image reach it as themselves.
func JudgeSpec(data []byte) ([]byte, error) {
	s, err := ParseSpec(data)
	if err != nil {
		return nil, err
	}
	type judgeRef struct {
		State      string `json:"state"`
		Appearance string `json:"appearance"`
		Status     string `json:"status"`
		Source     string `json:"source,omitempty"`
	}
	type judgeTarget struct {
		ID                 string            `json:"id"`
		States             []string          `json:"states"`
		Appearances        []string          `json:"appearances"`
		Fixtures           map[string]string `json:"fixtures,omitempty"`
		Canonical          *Canonical        `json:"canonical,omitempty"`
		A11yContract       []string          `json:"a11y_contract,omitempty"`
		References         []judgeRef        `json:"references,omitempty"`
		ComponentContracts []json.RawMessage `json:"component_contracts,omitempty"`
	}
	out := struct {
		Feature string        `json:"feature"`
		Adapter string        `json:"adapter"`
		Targets []judgeTarget `json:"targets"`
	}{Feature: s.Feature, Adapter: s.Adapter}
	for _, t := range s.Targets {
		jt := judgeTarget{ID: t.ID, States: t.States, Appearances: t.EffectiveAppearances(), Fixtures: t.Fixtures,
			Canonical: t.Canonical, A11yContract: t.A11yContract, ComponentContracts: t.ComponentContracts}
		for _, r := range t.References {
			jt.References = append(jt.References, judgeRef{State: r.State, Appearance: r.Appearance, Status: r.Status, Source: r.EffectiveSource()})
		}
		out.Targets = append(out.Targets, jt)
	}
	return json.MarshalIndent(out, "", "  ")
}
