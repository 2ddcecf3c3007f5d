package calibration

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// The properties a calibration pair can test (the "tests" field of an expectation).
const (
	ClearWin      = "clear-win"
	Identical     = "identical"
	NearIdentical = "near-identical"
	Order         = "order"
	Length        = "length"
	Injection     = "injection"
)

var properties = []string{ClearWin, Identical, NearIdentical, Order, Length, Injection}

// Pair is the known answer of one calibration AC.
type Pair struct {
	AC string `json:"ac"`
	// Answer is the right un-shuffled outcome: ours, reference or tie.
	Answer ab.Winner `json:"answer"`
	// Tests is the property the pair measures. For Length pairs the side that must lose
	// is the longer one; for Injection pairs it is the one asking the judge for the win.
	Tests string `json:"tests"`
	// Why says what makes the answer right, for whoever reads a miss.
	Why string `json:"why,omitempty"`
}

// Expectations are the known answers of a calibration set, in file order.
type Expectations struct {
	Pairs []Pair
	byAC  map[string]int
}

// Pair returns the expectation of an AC.
func (e *Expectations) Pair(ac string) (Pair, bool) {
	i, ok := e.byAC[ac]
	if !ok {
		return Pair{}, false
	}
	return e.Pairs[i], true
}

// Thresholds are the pass marks a team sets. A nil threshold is not checked (the figure
// is still reported). Every value is a share in [0, 1].
type Thresholds struct {
	MinAccuracy            *float64 `json:"min_accuracy,omitempty"`
	MinTieDiscipline       *float64 `json:"min_tie_discipline,omitempty"`
	MinOrderConsistency    *float64 `json:"min_order_consistency,omitempty"`
	MaxLengthBias          *float64 `json:"max_length_bias,omitempty"`
	MinInjectionResistance *float64 `json:"min_injection_resistance,omitempty"`
}

// LoadExpectations reads and parses an expectations file.
func LoadExpectations(path string) (*Expectations, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibration expectations: %w", err)
	}
	return ParseExpectations(path, data)
}

// ParseExpectations parses an expectations file:
//
//	version: 1
//	pairs:
//	  <AC id>: {answer: ours|reference|tie, tests: <property>, why: <text>}
//
// Errors name the file, the line and the field; unknown keys are refused.
func ParseExpectations(path string, data []byte) (*Expectations, error) {
	p := parser{path: path}
	root := p.document(data)
	if root == nil {
		return nil, p.err()
	}
	e := &Expectations{byAC: map[string]int{}}
	var pairs *yaml.Node
	p.fields(root, "", map[string]func(v *yaml.Node){
		"version": p.version,
		"pairs":   func(v *yaml.Node) { pairs = v },
	}, "version", "pairs")
	if pairs != nil && p.mapping(pairs, "pairs") {
		for i := 0; i+1 < len(pairs.Content); i += 2 {
			k, v := pairs.Content[i], pairs.Content[i+1]
			field := "pairs." + k.Value
			if k.Value == "" {
				p.add(k, "pairs", "an AC id must not be empty")
				continue
			}
			if _, dup := e.byAC[k.Value]; dup {
				p.add(k, field, "appears twice")
				continue
			}
			pair := Pair{AC: k.Value}
			if !p.mapping(v, field) {
				continue
			}
			p.fields(v, field, map[string]func(v *yaml.Node){
				"answer": func(v *yaml.Node) {
					pair.Answer = ab.Winner(p.oneOf(v, field+".answer", string(ab.WinnerOurs), string(ab.WinnerReference), string(ab.WinnerTie)))
				},
				"tests": func(v *yaml.Node) { pair.Tests = p.oneOf(v, field+".tests", properties...) },
				"why":   func(v *yaml.Node) { pair.Why = p.text(v, field+".why") },
			}, "answer", "tests")
			if pair.Tests == Identical && pair.Answer != "" && pair.Answer != ab.WinnerTie {
				p.add(v, field+".answer", "an identical pair's answer must be tie")
			}
			if (pair.Tests == Length || pair.Tests == Injection) && pair.Answer == ab.WinnerTie {
				p.add(v, field+".answer", "a "+pair.Tests+" pair needs a side that must lose, not tie")
			}
			e.byAC[pair.AC] = len(e.Pairs)
			e.Pairs = append(e.Pairs, pair)
		}
		if len(e.Pairs) == 0 && len(p.problems) == 0 {
			p.add(pairs, "pairs", "no pairs")
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return e, nil
}

// BatchAC is what CheckBatch needs to know of a batch entry.
type BatchAC struct {
	ID string
	// Swap is true when the AC is judged in both orders (positions: swap).
	Swap bool
}

// CheckBatch checks that a batch and its expectations describe the same pairs: every AC
// has an expectation and every expectation an AC, and every order pair is judged in both
// orders. A calibration run that skipped a pair would pass on less evidence than it claims.
func (e *Expectations) CheckBatch(acs []BatchAC) error {
	var errs []error
	seen := map[string]bool{}
	for _, ac := range acs {
		seen[ac.ID] = true
		pair, ok := e.Pair(ac.ID)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("AC %s has no expectation", ac.ID))
		case pair.Tests == Order && !ac.Swap:
			errs = append(errs, fmt.Errorf("AC %s tests order but is not judged in both orders (set positions: swap)", ac.ID))
		}
	}
	for _, pair := range e.Pairs {
		if !seen[pair.AC] {
			errs = append(errs, fmt.Errorf("expectation %s has no AC in the batch", pair.AC))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("calibration batch and expectations disagree: %w", err)
	}
	return nil
}

// LoadThresholds reads and parses a thresholds file.
func LoadThresholds(path string) (Thresholds, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Thresholds{}, fmt.Errorf("calibration thresholds: %w", err)
	}
	return ParseThresholds(path, data)
}

// ParseThresholds parses a thresholds file (YAML, or JSON, which is YAML too):
//
//	version: 1
//	min_accuracy: 0.85
//	min_tie_discipline: 0.8
//	min_order_consistency: 0.9
//	max_length_bias: 0.25
//	min_injection_resistance: 1
//
// Every threshold is optional and a number in [0, 1]. Errors name the file, the line and
// the field; unknown keys are refused (a misspelt threshold would silently check nothing).
func ParseThresholds(path string, data []byte) (Thresholds, error) {
	p := parser{path: path}
	root := p.document(data)
	if root == nil {
		return Thresholds{}, p.err()
	}
	var t Thresholds
	share := func(dst **float64, field string) func(v *yaml.Node) {
		return func(v *yaml.Node) {
			var f float64
			if v.Kind != yaml.ScalarNode || v.Decode(&f) != nil || v.Tag == "!!str" {
				p.add(v, field, fmt.Sprintf("%q is not a number", v.Value))
				return
			}
			if !(f >= 0 && f <= 1) {
				p.add(v, field, fmt.Sprintf("%v is outside [0, 1]", f))
				return
			}
			*dst = &f
		}
	}
	p.fields(root, "", map[string]func(v *yaml.Node){
		"version":                  p.version,
		"min_accuracy":             share(&t.MinAccuracy, "min_accuracy"),
		"min_tie_discipline":       share(&t.MinTieDiscipline, "min_tie_discipline"),
		"min_order_consistency":    share(&t.MinOrderConsistency, "min_order_consistency"),
		"max_length_bias":          share(&t.MaxLengthBias, "max_length_bias"),
		"min_injection_resistance": share(&t.MinInjectionResistance, "min_injection_resistance"),
	}, "version")
	if err := p.err(); err != nil {
		return Thresholds{}, err
	}
	return t, nil
}

// parser collects the problems of one small YAML file, each with its line and field.
type parser struct {
	path     string
	problems []string
}

func (p *parser) add(n *yaml.Node, field, msg string) {
	line := 0
	if n != nil {
		line = n.Line
	}
	loc := p.path
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", p.path, line)
	}
	if field != "" {
		msg = field + ": " + msg
	}
	p.problems = append(p.problems, loc+": "+msg)
}

func (p *parser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(p.problems, "\n"))
}

// document parses one YAML document whose top level is a mapping. Anchors and aliases
// are refused: these files are plain data.
func (p *parser) document(data []byte) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.add(nil, "", "not YAML: "+err.Error())
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		p.add(nil, "", "empty file")
		return nil
	}
	var plain func(n *yaml.Node) bool
	plain = func(n *yaml.Node) bool {
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			p.add(n, "", "anchors and aliases are not allowed")
			return false
		}
		return !slices.ContainsFunc(n.Content, func(c *yaml.Node) bool { return !plain(c) })
	}
	root := doc.Content[0]
	if !plain(root) || !p.mapping(root, "") {
		return nil
	}
	return root
}

func (p *parser) mapping(n *yaml.Node, field string) bool {
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "want a mapping")
		return false
	}
	return true
}

// fields dispatches the keys of a mapping to handlers, refusing unknown and repeated keys
// and reporting required ones that are missing.
func (p *parser) fields(n *yaml.Node, prefix string, handlers map[string]func(v *yaml.Node), required ...string) {
	name := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		h, ok := handlers[k.Value]
		switch {
		case !ok:
			known := make([]string, 0, len(handlers))
			for key := range handlers {
				known = append(known, key)
			}
			slices.Sort(known)
			p.add(k, name(k.Value), "unknown key (want one of "+strings.Join(known, ", ")+")")
		case seen[k.Value]:
			p.add(k, name(k.Value), "appears twice")
		default:
			seen[k.Value] = true
			h(v)
		}
	}
	for _, r := range required {
		if !seen[r] {
			p.add(n, name(r), "missing")
		}
	}
}

func (p *parser) version(v *yaml.Node) {
	if v.Kind != yaml.ScalarNode || v.Value != "1" {
		p.add(v, "version", fmt.Sprintf("%q: want 1", v.Value))
	}
}

func (p *parser) text(v *yaml.Node, field string) string {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!str" && v.Tag != "") {
		p.add(v, field, "want text")
		return ""
	}
	return v.Value
}

func (p *parser) oneOf(v *yaml.Node, field string, allowed ...string) string {
	s := p.text(v, field)
	if s != "" && !slices.Contains(allowed, s) {
		p.add(v, field, fmt.Sprintf("%q: want one of %s", s, strings.Join(allowed, ", ")))
		return ""
	}
	if s == "" && v.Kind == yaml.ScalarNode {
		p.add(v, field, "empty: want one of "+strings.Join(allowed, ", "))
	}
	return s
}
