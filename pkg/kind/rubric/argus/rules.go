package argus

import "fmt"

// DimensionRule is one dimension of a rubric as a verdict is checked against it: its
// name, the anchor it is judged against and the score it must reach. A view's job keeps
// its rubric's rules (Rules), so a person's review of a verdict is checked against the
// rubric the judge's was, without the rubric's document.
type DimensionRule struct {
	Name      string  `json:"name"`
	Anchor    string  `json:"anchor"`
	Threshold float64 `json:"threshold"`
}

// Rules are the rubric's dimensions in its order, as a verdict is checked against them.
func (r *Rubric) Rules() []DimensionRule {
	names := r.DimensionNames()
	out := make([]DimensionRule, 0, len(names))
	for _, n := range names {
		d := r.Dimensions[n]
		out = append(out, DimensionRule{Name: n, Anchor: d.Anchor, Threshold: d.Threshold})
	}
	return out
}

// RubricOfRules is the rubric a verdict is checked against, from its rules (Rules): the
// dimensions in their order, with their anchors and thresholds, and nothing of the loop.
// A rule with no name, an unknown anchor, a threshold outside [0, 1] or a name given
// twice is an error naming it.
func RubricOfRules(rules []DimensionRule) (*Rubric, error) {
	if len(rules) == 0 {
		return nil, fmt.Errorf("rubric rules: no dimension")
	}
	r := &Rubric{Dimensions: map[string]RubricDimension{}}
	for i, d := range rules {
		switch {
		case d.Name == "":
			return nil, fmt.Errorf("rubric rules[%d].name: empty", i)
		case !validAnchor(d.Anchor):
			return nil, fmt.Errorf("rubric rules[%d].anchor: %q is not one of reference, design-system, spec-text", i, d.Anchor)
		case d.Threshold < 0 || d.Threshold > 1 || d.Threshold != d.Threshold:
			return nil, fmt.Errorf("rubric rules[%d].threshold: %v is not in [0, 1]", i, d.Threshold)
		}
		if _, dup := r.Dimensions[d.Name]; dup {
			return nil, fmt.Errorf("rubric rules[%d].name: %q given twice", i, d.Name)
		}
		r.Dimensions[d.Name] = RubricDimension{Weight: 1, Threshold: d.Threshold, Anchor: d.Anchor}
		r.order = append(r.order, d.Name)
	}
	return r, nil
}
