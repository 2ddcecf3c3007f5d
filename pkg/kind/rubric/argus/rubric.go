package argus

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
)

//go:embed rubric.json
var defaultRubricJSON []byte

// Anchors a dimension can be judged against.
const (
	AnchorReference    = "reference"
	AnchorDesignSystem = "design-system"
	AnchorSpecText     = "spec-text"
)

// Loop defaults, used when a rubric's loop block leaves a value out.
const (
	DefaultConsecutivePasses = 2
	DefaultMaxAttempts       = 3
	DefaultMaxIterations     = 12
)

// Rubric is rubric.json: the dimensions a judge scores and the loop's budgets.
type Rubric struct {
	// Version and Description identify the rubric for people reading a verdict.
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Loop holds the convergence budgets.
	Loop RubricLoop `json:"loop"`
	// Scoring is guidance text for the judge.
	Scoring RubricScoring `json:"scoring"`
	// Dimensions maps each scored dimension to its pass mark and anchor.
	Dimensions map[string]RubricDimension `json:"dimensions"`
	// order keeps the dimensions as written, so failed dimensions are listed in the
	// rubric's own order rather than alphabetically.
	order []string
}

// RubricLoop is the rubric's loop block.
type RubricLoop struct {
	// ConsecutivePassesRequired is the streak that signs a view off (default 2).
	ConsecutivePassesRequired int `json:"consecutive_passes_required"`
	// MaxAttemptsPerDimension is how often a dimension may fail before it is frozen
	// (default 3).
	MaxAttemptsPerDimension int `json:"max_attempts_per_dimension"`
	// MaxIterationsDefault is the per-view iteration budget (default 12).
	MaxIterationsDefault int `json:"max_iterations_default"`
}

// RubricScoring is descriptive text shown to the judge; the scale itself is fixed by
// the verdict schema (0, 0.5, 1).
type RubricScoring struct {
	// Scale lists the allowed scores, for the judge's prompt.
	Scale []float64 `json:"scale,omitempty"`
	// Rule explains how scores become a pass.
	Rule string `json:"rule,omitempty"`
	// Ranking explains the pairwise comparison with the previous render.
	Ranking string `json:"ranking,omitempty"`
}

// RubricDimension is one scored dimension.
type RubricDimension struct {
	// Weight ranks dimensions for reporting; it does not change pass or fail.
	Weight float64 `json:"weight"`
	// Threshold is the score a dimension must reach to pass (default 1).
	Threshold float64 `json:"threshold"`
	// Anchor is what the judge must compare against: reference, design-system or
	// spec-text.
	Anchor string `json:"anchor"`
	// Description tells the judge what the dimension covers.
	Description string `json:"description,omitempty"`
}

// DefaultRubricJSON returns the built-in rubric document, as embedded in the binary.
func DefaultRubricJSON() []byte {
	return append([]byte(nil), defaultRubricJSON...)
}

// DefaultRubric returns a fresh copy of the built-in rubric (seven dimensions, two
// consecutive passes, three attempts per dimension, twelve iterations).
func DefaultRubric() *Rubric {
	r, err := ParseRubric(defaultRubricJSON)
	if err != nil {
		panic("argus: embedded rubric.json is invalid: " + err.Error())
	}
	return r
}

// ParseRubric reads a rubric.json. Values a rubric leaves out take the defaults
// (threshold 1, weight 1, the loop defaults), so a team can write a short rubric that
// only lists its dimensions. Unknown keys are errors, "_"-prefixed keys comments.
// A threshold must lie in [0,1], an anchor must be one of the three anchors, and loop
// values must be at least 1.
func ParseRubric(data []byte) (*Rubric, error) {
	root, err := decodeJSON(data, true)
	if err != nil {
		return nil, fmt.Errorf("rubric: %w", err)
	}
	obj, ok := root.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("rubric: top level is %s, want an object", kindOf(root))
	}
	r := &Rubric{
		Loop: RubricLoop{
			ConsecutivePassesRequired: DefaultConsecutivePasses,
			MaxAttemptsPerDimension:   DefaultMaxAttempts,
			MaxIterationsDefault:      DefaultMaxIterations,
		},
		Dimensions: map[string]RubricDimension{},
	}
	haveDims := false
	for _, m := range obj {
		switch m.Key {
		case "version", "description":
			s, ok := m.Val.(string)
			if !ok {
				return nil, fmt.Errorf("rubric: %s must be a string", m.Key)
			}
			if m.Key == "version" {
				r.Version = s
			} else {
				r.Description = s
			}
		case "loop":
			if err := parseRubricLoop(m.Val, &r.Loop); err != nil {
				return nil, fmt.Errorf("rubric: loop: %w", err)
			}
		case "scoring":
			if err := parseRubricScoring(m.Val, &r.Scoring); err != nil {
				return nil, fmt.Errorf("rubric: scoring: %w", err)
			}
		case "dimensions":
			dims, ok := m.Val.(jsonObject)
			if !ok {
				return nil, fmt.Errorf("rubric: dimensions must be an object, got %s", kindOf(m.Val))
			}
			for _, d := range dims {
				if isComment(d.Key) {
					continue
				}
				dim, err := parseRubricDimension(d.Val)
				if err != nil {
					return nil, fmt.Errorf("rubric: dimensions.%s: %w", d.Key, err)
				}
				r.Dimensions[d.Key] = dim
				r.order = append(r.order, d.Key)
			}
			haveDims = true
		default:
			if !isComment(m.Key) {
				return nil, fmt.Errorf("rubric: unknown key %q", m.Key)
			}
		}
	}
	if !haveDims || len(r.order) == 0 {
		return nil, errors.New("rubric: dimensions must list at least one dimension")
	}
	if vs := checkSchema(rubricSchema, data); len(vs) > 0 {
		return nil, fmt.Errorf("rubric: %s: %s (rubric schema)", vs[0].Path, vs[0].Message)
	}
	return r, nil
}

func parseRubricLoop(v any, l *RubricLoop) error {
	obj, ok := v.(jsonObject)
	if !ok {
		return fmt.Errorf("must be an object, got %s", kindOf(v))
	}
	for _, m := range obj {
		var dst *int
		switch m.Key {
		case "consecutive_passes_required":
			dst = &l.ConsecutivePassesRequired
		case "max_attempts_per_dimension":
			dst = &l.MaxAttemptsPerDimension
		case "max_iterations_default":
			dst = &l.MaxIterationsDefault
		default:
			if isComment(m.Key) {
				continue
			}
			return fmt.Errorf("unknown key %q", m.Key)
		}
		n, ok := intValue(m.Val)
		if !ok || n < 1 {
			return fmt.Errorf("%s must be a whole number >= 1, got %s", m.Key, describe(m.Val))
		}
		*dst = n
	}
	return nil
}

func parseRubricScoring(v any, s *RubricScoring) error {
	obj, ok := v.(jsonObject)
	if !ok {
		return fmt.Errorf("must be an object, got %s", kindOf(v))
	}
	for _, m := range obj {
		switch m.Key {
		case "scale":
			arr, ok := m.Val.([]any)
			if !ok {
				return errors.New("scale must be an array of numbers")
			}
			s.Scale = nil
			for _, e := range arr {
				f, ok := numberValue(e)
				if !ok {
					return errors.New("scale must be an array of numbers")
				}
				s.Scale = append(s.Scale, f)
			}
		case "rule", "ranking":
			str, ok := m.Val.(string)
			if !ok {
				return fmt.Errorf("%s must be a string", m.Key)
			}
			if m.Key == "rule" {
				s.Rule = str
			} else {
				s.Ranking = str
			}
		default:
			if !isComment(m.Key) {
				return fmt.Errorf("unknown key %q", m.Key)
			}
		}
	}
	return nil
}

func parseRubricDimension(v any) (RubricDimension, error) {
	obj, ok := v.(jsonObject)
	if !ok {
		return RubricDimension{}, fmt.Errorf("must be an object, got %s", kindOf(v))
	}
	d := RubricDimension{Weight: 1, Threshold: 1}
	haveAnchor := false
	for _, m := range obj {
		switch m.Key {
		case "weight":
			f, ok := numberValue(m.Val)
			if !ok || f < 0 {
				return d, fmt.Errorf("weight must be a number >= 0, got %s", describe(m.Val))
			}
			d.Weight = f
		case "threshold":
			f, ok := numberValue(m.Val)
			if !ok || f < 0 || f > 1 {
				return d, fmt.Errorf("threshold must be a number in [0,1], got %s", describe(m.Val))
			}
			d.Threshold = f
		case "anchor":
			s, _ := m.Val.(string)
			if !validAnchor(s) {
				return d, fmt.Errorf("anchor %s is not one of reference, design-system, spec-text", describe(m.Val))
			}
			d.Anchor = s
			haveAnchor = true
		case "description":
			s, ok := m.Val.(string)
			if !ok {
				return d, errors.New("description must be a string")
			}
			d.Description = s
		default:
			if !isComment(m.Key) {
				return d, fmt.Errorf("unknown key %q", m.Key)
			}
		}
	}
	if !haveAnchor {
		return d, errors.New("anchor is required")
	}
	return d, nil
}

func validAnchor(s string) bool {
	return s == AnchorReference || s == AnchorDesignSystem || s == AnchorSpecText
}

// DimensionNames lists the dimensions in the rubric's order (alphabetical for a Rubric
// built in code rather than parsed).
func (r *Rubric) DimensionNames() []string {
	if len(r.order) == len(r.Dimensions) {
		ok := true
		for _, n := range r.order {
			if _, has := r.Dimensions[n]; !has {
				ok = false
				break
			}
		}
		if ok {
			return append([]string(nil), r.order...)
		}
	}
	names := make([]string, 0, len(r.Dimensions))
	for n := range r.Dimensions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Threshold is the pass mark of a dimension, 1 for one the rubric does not list.
func (r *Rubric) Threshold(dim string) float64 {
	if d, ok := r.Dimensions[dim]; ok {
		return d.Threshold
	}
	return 1
}

// LoopParams turns the rubric's loop block into loop parameters.
func (r *Rubric) LoopParams() LoopParams {
	return LoopParams{
		RequiredPasses: r.Loop.ConsecutivePassesRequired,
		MaxAttempts:    r.Loop.MaxAttemptsPerDimension,
		MaxIterations:  r.Loop.MaxIterationsDefault,
	}
}
