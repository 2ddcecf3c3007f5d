package argus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// GateStatus is the value of one deterministic gate (the events' gate status).
type GateStatus = events.GateStatus

// Gate values. Diff is only valid for the snapshot gate, which reports a changed look
// rather than a failure of code.
const (
	GatePass = events.GatePass
	GateFail = events.GateFail
	GateSkip = events.GateSkip
	GateDiff = events.GateDiff
)

// Gate names as the gate-result schema spells them.
const (
	GateBuild           = "build"
	GateLint            = "lint"
	GateTypeCheck       = "type_check"
	GateTokenContrast   = "token_contrast"
	GateTokenCompliance = "token_compliance"
	GateSnapshot        = "snapshot"
	GateFlows           = "flows"
	GateA11yIDs         = "a11y_ids"
)

// Gates is the gates object of a gate result. An empty status means the gate was not
// reported and counts as skip.
type Gates struct {
	// Build, Lint and TypeCheck come from the project's gates adapter.
	Build     GateStatus `json:"build,omitempty"`
	Lint      GateStatus `json:"lint,omitempty"`
	TypeCheck GateStatus `json:"type_check,omitempty"`
	// TokenContrast is computed by tribunal (CheckContrast).
	TokenContrast GateStatus `json:"token_contrast,omitempty"`
	// TokenCompliance is the adapter's source-level check for hard-coded values, the
	// one check the judge cannot make because it never sees code.
	TokenCompliance GateStatus `json:"token_compliance,omitempty"`
	// Snapshot is pass, diff or skip: the visual regression baseline.
	Snapshot GateStatus `json:"snapshot,omitempty"`
	// Flows is the adapter's functional end-to-end suite.
	Flows GateStatus `json:"flows,omitempty"`
	// A11yIDs is computed by tribunal from the probe (CheckA11yIDs).
	A11yIDs *A11yResult `json:"a11y_ids,omitempty"`
	// Extra are the adapter's gates beyond the six platform gates, in the order it
	// printed them. As in the seed's gates.sh, which merges the adapter's whole object
	// into the result, each is pass, fail or skip: a failing one turns the floor red, a
	// passing one is reported. In JSON they are keys of the gates object like the others.
	Extra []ExtraGate `json:"-"`
}

// ExtraGate is one adapter gate outside the six platform gates.
type ExtraGate struct {
	Name   string
	Status GateStatus
}

// extraGateName bounds an extra gate's name: it is shown in events, logs and the
// console, so it stays a short identifier.
var extraGateName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// knownGate reports whether name is one of the schema's gates.
func knownGate(name string) bool {
	switch name {
	case GateBuild, GateLint, GateTypeCheck, GateTokenContrast, GateTokenCompliance, GateSnapshot, GateFlows, GateA11yIDs:
		return true
	}
	return false
}

// Names lists the string-valued gates in the order a gate result writes them: the
// schema's seven, then the adapter's extra gates.
func (g Gates) Names() []string {
	var out []string
	for _, sg := range g.statusGates() {
		out = append(out, sg.name)
	}
	for _, e := range g.Extra {
		out = append(out, e.Name)
	}
	return out
}

// Status returns a string-valued gate's status ("" when unreported or unknown).
func (g Gates) Status(name string) GateStatus {
	for _, sg := range g.statusGates() {
		if sg.name == name {
			return *sg.val
		}
	}
	for _, e := range g.Extra {
		if e.Name == name {
			return e.Status
		}
	}
	return ""
}

// gatesJSON is Gates without its methods, for the schema gates' encoding.
type gatesJSON Gates

// MarshalJSON writes the schema's gates and then every extra gate as keys of one object,
// the shape gates.sh writes.
func (g Gates) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(gatesJSON(g))
	if err != nil {
		return nil, err
	}
	if len(g.Extra) == 0 {
		return base, nil
	}
	var buf bytes.Buffer
	buf.Write(base[:len(base)-1])
	for i, e := range g.Extra {
		if i > 0 || len(base) > 2 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(e.Name)
		v, _ := json.Marshal(string(e.Status))
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// statusGates lists the string-valued gates in schema order with their field.
func (g *Gates) statusGates() []struct {
	name string
	val  *GateStatus
} {
	return []struct {
		name string
		val  *GateStatus
	}{
		{GateBuild, &g.Build}, {GateLint, &g.Lint}, {GateTypeCheck, &g.TypeCheck},
		{GateTokenContrast, &g.TokenContrast}, {GateTokenCompliance, &g.TokenCompliance},
		{GateSnapshot, &g.Snapshot}, {GateFlows, &g.Flows},
	}
}

// validStatus reports whether a value is allowed for the named gate.
func validStatus(name string, s GateStatus) bool {
	switch s {
	case "", GatePass, GateSkip:
		return true
	case GateFail:
		return name != GateSnapshot
	case GateDiff:
		return name == GateSnapshot
	}
	return false
}

// allowedFor describes the allowed values of a gate for error messages.
func allowedFor(name string) string {
	if name == GateSnapshot {
		return "pass, diff or skip"
	}
	return "pass, fail or skip"
}

// Validate checks every value against the schema's enums.
func (g Gates) Validate() error {
	for _, sg := range g.statusGates() {
		if !validStatus(sg.name, *sg.val) {
			return fmt.Errorf("gates.%s: %q is not %s", sg.name, string(*sg.val), allowedFor(sg.name))
		}
	}
	for _, e := range g.Extra {
		if knownGate(e.Name) || !extraGateName.MatchString(e.Name) {
			return fmt.Errorf("gates: %q is not a valid extra gate name", e.Name)
		}
		if e.Status == "" || !validStatus(e.Name, e.Status) {
			return fmt.Errorf("gates.%s: %q is not pass, fail or skip", e.Name, string(e.Status))
		}
	}
	if g.A11yIDs != nil {
		if g.A11yIDs.Expected < 0 || g.A11yIDs.Present < 0 {
			return errors.New("gates.a11y_ids: counts must not be negative")
		}
	}
	return nil
}

// Failing names the gates that keep the floor red, in schema order: a fail, a snapshot
// diff, a11y ids missing, or any value outside the schema (an unknown status is never
// taken for a pass). These are the items the implementer is asked to fix.
func (g Gates) Failing() []string {
	out := []string{}
	for _, sg := range g.statusGates() {
		switch *sg.val {
		case "", GatePass, GateSkip:
		default:
			out = append(out, sg.name)
		}
	}
	if g.A11yIDs != nil && !g.A11yIDs.Green() {
		out = append(out, GateA11yIDs)
	}
	for _, e := range g.Extra {
		switch e.Status {
		case GatePass, GateSkip:
		default:
			out = append(out, e.Name)
		}
	}
	return out
}

// AllGreen is the derived floor: true iff no gate fails. Skipped gates never fail.
func (g Gates) AllGreen() bool { return len(g.Failing()) == 0 }

// GateResult matches the gate-result schema. AllGreen is only ever set from Gates (by
// AssembleGateResult or Normalize); a value read from a file is a claim to check.
type GateResult struct {
	// Feature, Target, State and Appearance name the gated view.
	Feature    string `json:"feature"`
	Target     string `json:"target"`
	State      string `json:"state,omitempty"`
	Appearance string `json:"appearance,omitempty"`
	// Gates holds every gate's status.
	Gates Gates `json:"gates"`
	// AllGreen is true iff no gate fails; the judge runs only when it is.
	AllGreen bool `json:"all_green"`
	// Tribunal holds tribunal's additions (nil for none): the seed's schema has no
	// place to say why a gate reads skip.
	Tribunal *GateNotes `json:"tribunal,omitempty"`
}

// GateNotes are tribunal's additions to a gate result, under its one "tribunal" key: who
// supplied the platform gates, why each skipped gate was skipped, and what of the
// gates adapter's output was not taken. A skip is never silent: the result says why.
type GateNotes struct {
	// GatesAdapter names the gates adapter that ran ("" when none did).
	GatesAdapter string `json:"gates_adapter,omitempty"`
	// Skipped maps every gate that reads skip to why.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Ignored maps each key of the adapter's output that was not taken to why.
	Ignored map[string]string `json:"ignored,omitempty"`
}

// parseGateNotes reads a gate result's "tribunal" object.
func parseGateNotes(v any) (*GateNotes, error) {
	obj, ok := v.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("tribunal is %s, want an object", kindOf(v))
	}
	n := &GateNotes{}
	strings := func(key string, v any) (map[string]string, error) {
		o, ok := v.(jsonObject)
		if !ok {
			return nil, fmt.Errorf("tribunal.%s is %s, want an object", key, kindOf(v))
		}
		out := map[string]string{}
		for _, m := range o {
			s, ok := m.Val.(string)
			if !ok {
				return nil, fmt.Errorf("tribunal.%s.%s must be a string, got %s", key, m.Key, kindOf(m.Val))
			}
			out[m.Key] = s
		}
		return out, nil
	}
	for _, m := range obj {
		var err error
		switch m.Key {
		case "gates_adapter":
			s, ok := m.Val.(string)
			if !ok {
				return nil, fmt.Errorf("tribunal.gates_adapter must be a string, got %s", kindOf(m.Val))
			}
			n.GatesAdapter = s
		case "skipped":
			n.Skipped, err = strings(m.Key, m.Val)
		case "ignored":
			n.Ignored, err = strings(m.Key, m.Val)
		default:
			err = fmt.Errorf("tribunal: unknown key %q", m.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Normalize validates the gates, replaces AllGreen with the value derived from them and
// reports whether the stored value disagreed, so the caller can count adapters or
// files that claimed a floor they did not have.
func (r *GateResult) Normalize() (disagreed bool, err error) {
	if err := r.Gates.Validate(); err != nil {
		return false, fmt.Errorf("gate result: %w", err)
	}
	derived := r.Gates.AllGreen()
	disagreed = r.AllGreen != derived
	r.AllGreen = derived
	return disagreed, nil
}

// ParseGateResult reads a gate-result document strictly against the schema (required
// keys, no unknown keys, enum values). It does not normalize: call Normalize to derive
// all_green and learn whether the document's claim was wrong.
func ParseGateResult(data []byte) (*GateResult, error) {
	root, err := decodeJSON(data, true)
	if err != nil {
		return nil, fmt.Errorf("gate result: %w", err)
	}
	obj, ok := root.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("gate result: top level is %s, want an object", kindOf(root))
	}
	r := &GateResult{}
	seen := map[string]bool{}
	for _, m := range obj {
		seen[m.Key] = true
		switch m.Key {
		case "feature", "target", "state", "appearance":
			s, ok := m.Val.(string)
			if !ok {
				return nil, fmt.Errorf("gate result: %s must be a string, got %s", m.Key, kindOf(m.Val))
			}
			switch m.Key {
			case "feature":
				r.Feature = s
			case "target":
				r.Target = s
			case "state":
				r.State = s
			default:
				r.Appearance = s
			}
		case "gates":
			g, _, err := parseGates(m.Val, true)
			if err != nil {
				return nil, fmt.Errorf("gate result: %w", err)
			}
			r.Gates = g
		case "all_green":
			b, ok := m.Val.(bool)
			if !ok {
				return nil, fmt.Errorf("gate result: all_green must be a boolean, got %s", kindOf(m.Val))
			}
			r.AllGreen = b
		case "tribunal":
			n, err := parseGateNotes(m.Val)
			if err != nil {
				return nil, fmt.Errorf("gate result: %w", err)
			}
			r.Tribunal = n
		default:
			return nil, fmt.Errorf("gate result: unknown key %q", m.Key)
		}
	}
	for _, k := range []string{"feature", "target", "gates", "all_green"} {
		if !seen[k] {
			return nil, fmt.Errorf("gate result: %s is required", k)
		}
	}
	if vs := checkSchema(gateResultSchema, data); len(vs) > 0 {
		return nil, fmt.Errorf("gate result: %s: %s (gate-result schema)", vs[0].Path, vs[0].Message)
	}
	return r, nil
}

// parseGates reads a gates object. withOwn takes the two gates tribunal computes itself
// (token_contrast, a11y_ids); without it (an adapter's output) they are left out and
// returned in ignored with the value the adapter printed, as the seed's gates.sh
// overwrites them with its own.
func parseGates(v any, withOwn bool) (g Gates, ignored map[string]string, err error) {
	obj, ok := v.(jsonObject)
	if !ok {
		return Gates{}, nil, fmt.Errorf("gates is %s, want an object", kindOf(v))
	}
	fields := map[string]*GateStatus{}
	for _, sg := range g.statusGates() {
		fields[sg.name] = sg.val
	}
	for _, m := range obj {
		if !withOwn && (m.Key == GateTokenContrast || m.Key == GateA11yIDs) {
			if ignored == nil {
				ignored = map[string]string{}
			}
			ignored[m.Key] = describe(m.Val)
			continue
		}
		if m.Key == GateA11yIDs {
			a, err := parseA11yResult(m.Val)
			if err != nil {
				return Gates{}, nil, err
			}
			g.A11yIDs = &a
			continue
		}
		dst, ok := fields[m.Key]
		if !ok {
			// An extra gate, as gates.sh merges it: pass, fail or skip.
			if !extraGateName.MatchString(m.Key) {
				return Gates{}, nil, fmt.Errorf("gate name %q: want letters, digits, '_', '.' or '-', at most 64", m.Key)
			}
			s, ok := m.Val.(string)
			if !ok || s == "" || !validStatus(m.Key, GateStatus(s)) {
				return Gates{}, nil, fmt.Errorf("gate %s: %s is not pass, fail or skip", m.Key, describe(m.Val))
			}
			g.Extra = append(g.Extra, ExtraGate{Name: m.Key, Status: GateStatus(s)})
			continue
		}
		s, ok := m.Val.(string)
		if !ok || s == "" || !validStatus(m.Key, GateStatus(s)) {
			return Gates{}, nil, fmt.Errorf("gate %s: %s is not %s", m.Key, describe(m.Val), allowedFor(m.Key))
		}
		*dst = GateStatus(s)
	}
	return g, ignored, nil
}

func parseA11yResult(v any) (A11yResult, error) {
	obj, ok := v.(jsonObject)
	if !ok {
		return A11yResult{}, fmt.Errorf("a11y_ids is %s, want an object", kindOf(v))
	}
	var r A11yResult
	seen := map[string]bool{}
	for _, m := range obj {
		seen[m.Key] = true
		switch m.Key {
		case "expected", "present":
			n, ok := intValue(m.Val)
			if !ok || n < 0 {
				return r, fmt.Errorf("a11y_ids.%s must be a whole number >= 0, got %s", m.Key, describe(m.Val))
			}
			if m.Key == "expected" {
				r.Expected = n
			} else {
				r.Present = n
			}
		case "missing":
			list, ok := stringList(m.Val)
			if !ok {
				return r, errors.New("a11y_ids.missing must be an array of strings")
			}
			r.Missing = list
		default:
			return r, fmt.Errorf("a11y_ids: unknown key %q", m.Key)
		}
	}
	for _, k := range []string{"expected", "present", "missing"} {
		if !seen[k] {
			return r, fmt.Errorf("a11y_ids.%s is required", k)
		}
	}
	return r, nil
}

// AdapterGates are the platform gates a project's gates command reports. Empty values
// mean the adapter did not report the gate (skip).
type AdapterGates struct {
	// Build, Lint, TypeCheck, TokenCompliance and Flows are pass, fail or skip.
	Build           GateStatus
	Lint            GateStatus
	TypeCheck       GateStatus
	TokenCompliance GateStatus
	// Snapshot is pass, diff or skip.
	Snapshot GateStatus
	Flows    GateStatus
	// Extra are the adapter's other gates (see Gates.Extra).
	Extra []ExtraGate
	// Ignored are the gates tribunal computes itself that the adapter printed anyway
	// (token_contrast, a11y_ids), with the value it printed: left out, as the seed's
	// gates.sh overwrites them, and noted in the result.
	Ignored map[string]string
}

// ParseAdapterGates reads the JSON object a gates adapter prints, e.g.
// {"build":"pass","lint":"skip","snapshot":"diff"}. A key beyond the six platform gates
// is an extra gate, as the seed's gates.sh merges it into the result: pass, fail or skip,
// and a fail keeps the floor red. The two gates tribunal computes itself (token_contrast,
// a11y_ids) are left out whatever their value, as the seed's gates.sh overwrites them
// with its own, and listed in Ignored. Everything else is rejected with an error naming
// the offending key: prose around the object, values outside pass|fail|skip
// (pass|diff|skip for snapshot), a gate name that is not a short identifier.
// An adapter that cannot state its result in this form has not produced a result, and
// treating its output as "probably fine" would let a broken adapter open the floor.
func ParseAdapterGates(data []byte) (AdapterGates, error) {
	root, err := decodeJSON(data, true)
	if err != nil {
		return AdapterGates{}, fmt.Errorf("adapter gates: output is not one JSON object: %w", err)
	}
	g, ignored, err := parseGates(root, false)
	if err != nil {
		return AdapterGates{}, fmt.Errorf("adapter gates: %w", err)
	}
	return AdapterGates{
		Build: g.Build, Lint: g.Lint, TypeCheck: g.TypeCheck,
		TokenCompliance: g.TokenCompliance, Snapshot: g.Snapshot, Flows: g.Flows, Extra: g.Extra, Ignored: ignored,
	}, nil
}

// Skipped lists the string-valued gates that read skip, in the order of Names: the
// gates a result must say why of (GateNotes.Skipped).
func (g Gates) Skipped() []string {
	var out []string
	for _, n := range g.Names() {
		if g.Status(n) == GateSkip {
			out = append(out, n)
		}
	}
	return out
}

// orSkip fills an unreported gate with skip so a written result lists every gate.
func orSkip(s GateStatus) GateStatus {
	if s == "" {
		return GateSkip
	}
	return s
}

// AssembleGateResult combines the adapter's gates with the two gates tribunal computes
// (token_contrast, a11y_ids) into a complete result, every gate spelt out, and derives
// all_green. A nil a11y means there was no contract to check (reported as 0 of 0).
func AssembleGateResult(v View, feature string, adapter AdapterGates, tokenContrast GateStatus, a11y *A11yResult) GateResult {
	a := A11yResult{Missing: []string{}}
	if a11y != nil {
		a = *a11y
		if a.Missing == nil {
			a.Missing = []string{}
		}
	}
	r := GateResult{
		Feature: feature, Target: v.Target, State: v.State, Appearance: v.Appearance,
		Gates: Gates{
			Build: orSkip(adapter.Build), Lint: orSkip(adapter.Lint), TypeCheck: orSkip(adapter.TypeCheck),
			TokenContrast: orSkip(tokenContrast), TokenCompliance: orSkip(adapter.TokenCompliance),
			Snapshot: orSkip(adapter.Snapshot), Flows: orSkip(adapter.Flows), A11yIDs: &a,
			Extra: append([]ExtraGate(nil), adapter.Extra...),
		},
	}
	r.AllGreen = r.Gates.AllGreen()
	return r
}
