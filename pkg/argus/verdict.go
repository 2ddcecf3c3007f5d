package argus

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// DimensionScore is one dimension of a judge's verdict.
type DimensionScore struct {
	// Score is 0, 0.5 or 1.
	Score float64 `json:"score"`
	// Anchor is what the dimension was judged against.
	Anchor string `json:"anchor"`
	// Evidence is the observation that justifies the score.
	Evidence string `json:"evidence"`
}

// Verdict is the rubric judge's answer for one view and iteration (the verdict schema).
// AllPass and FailedDimensions are the judge's claim until NormalizeVerdict has
// replaced them with values derived from the scores.
type Verdict struct {
	// Iteration is the loop iteration the verdict is for, from 1.
	Iteration int `json:"iteration"`
	// Feature, Target, State and Appearance name the judged view.
	Feature    string `json:"feature"`
	Target     string `json:"target"`
	State      string `json:"state,omitempty"`
	Appearance string `json:"appearance,omitempty"`
	// ReferenceSource is human or candidate; with a candidate reference
	// visual_fidelity only means "unchanged from the approved render".
	ReferenceSource string `json:"reference_source,omitempty"`
	// Dimensions maps dimension name to its score.
	Dimensions map[string]DimensionScore `json:"dimensions"`
	// CloserToReferenceThanPrev is the pairwise rank against the previous render, nil
	// on the first iteration.
	CloserToReferenceThanPrev *bool `json:"closer_to_reference_than_prev"`
	// AllPass is true iff every dimension reached its threshold.
	AllPass bool `json:"all_pass"`
	// FailedDimensions lists the dimensions below threshold.
	FailedDimensions []string `json:"failed_dimensions"`
	// Notes is the judge's free-form summary.
	Notes string `json:"notes,omitempty"`
}

// FieldError is one field of a rubric verdict that could not be accepted (fielderr.Error, scoped
// to "verdict"). Any FieldError makes the answer a schema violation.
type FieldError = fielderr.Error

// fieldDoc scopes this package's field errors.
const fieldDoc = "verdict"

// VerdictError collects every schema violation found in one verdict. errors.As with a
// *FieldError finds the first.
type VerdictError struct {
	// Fields lists the violations, one per field, in the order found.
	Fields []*FieldError
}

// Error lists every violation on one line.
func (e *VerdictError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return fmt.Sprintf("verdict: %d schema violation(s): %s", len(e.Fields), strings.Join(parts, "; "))
}

// Unwrap exposes the individual field errors.
func (e *VerdictError) Unwrap() []error {
	out := make([]error, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f
	}
	return out
}

// Has reports whether some violation concerns the given field path.
func (e *VerdictError) Has(field string) bool {
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

// ErrVerdictSyntax is wrapped when the judge's answer is not one JSON object (after
// removing an optional ```json fence).
var ErrVerdictSyntax = errors.New("verdict is not a single JSON object")

// fieldErrs accumulates violations, keeping only the first per field so a value that
// already failed its type check is not reported again by the value checks.
type fieldErrs struct {
	list []*FieldError
}

func (f *fieldErrs) add(field, value, reason string) {
	for _, e := range f.list {
		if e.Field == field {
			return
		}
	}
	f.list = append(f.list, &FieldError{Doc: fieldDoc, Field: field, Value: value, Reason: reason})
}

func (f *fieldErrs) err() error {
	if len(f.list) == 0 {
		return nil
	}
	return &VerdictError{Fields: f.list}
}

var verdictKeys = []string{"iteration", "feature", "target", "state", "appearance", "reference_source",
	"dimensions", "closer_to_reference_than_prev", "all_pass", "failed_dimensions", "notes"}

var verdictRequired = []string{"iteration", "feature", "target", "dimensions", "all_pass", "failed_dimensions"}

// ParseVerdict parses the judge's answer against the verdict schema. The answer must
// be one JSON object, optionally wrapped in a single ```json fence (models add one even
// when asked not to, and it carries no meaning). Every violation is collected into a
// *VerdictError: unknown or duplicate fields, missing required fields, wrong types,
// scores other than exactly 0, 0.5 or 1, anchors outside reference|design-system|
// spec-text, blank evidence, iteration below 1. A verdict with any violation is
// rejected whole; nothing is salvaged from it.
func ParseVerdict(data []byte) (*Verdict, error) {
	body, err := stripFence(data)
	if err != nil {
		return nil, err
	}
	root, err := decodeJSON(body, true)
	if err != nil {
		var dup *duplicateKeyError
		if errors.As(err, &dup) {
			return nil, &VerdictError{Fields: []*FieldError{{Doc: fieldDoc, Field: dup.Path, Reason: "duplicate field"}}}
		}
		return nil, fmt.Errorf("%w: %v", ErrVerdictSyntax, err)
	}
	obj, ok := root.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("%w: got %s", ErrVerdictSyntax, kindOf(root))
	}
	var fe fieldErrs
	v := &Verdict{}
	seen := map[string]bool{}
	for _, m := range obj {
		seen[m.Key] = true
		switch m.Key {
		case "iteration":
			n, ok := intValue(m.Val)
			if !ok {
				fe.add("iteration", describe(m.Val), "must be a whole number >= 1")
				continue
			}
			v.Iteration = n
		case "feature", "target", "state", "appearance", "notes", "reference_source":
			s, ok := m.Val.(string)
			if !ok {
				fe.add(m.Key, describe(m.Val), "must be a string")
				continue
			}
			switch m.Key {
			case "feature":
				v.Feature = s
			case "target":
				v.Target = s
			case "state":
				v.State = s
			case "appearance":
				v.Appearance = s
			case "notes":
				v.Notes = s
			case "reference_source":
				if s != SourceHuman && s != SourceCandidate {
					fe.add(m.Key, strconv.Quote(s), "must be human or candidate")
				}
				v.ReferenceSource = s
			}
		case "dimensions":
			v.Dimensions = parseDimensions(m.Val, &fe)
		case "closer_to_reference_than_prev":
			switch b := m.Val.(type) {
			case nil:
			case bool:
				v.CloserToReferenceThanPrev = &b
			default:
				fe.add(m.Key, describe(m.Val), "must be true, false or null")
			}
		case "all_pass":
			b, ok := m.Val.(bool)
			if !ok {
				fe.add(m.Key, describe(m.Val), "must be a boolean")
				continue
			}
			v.AllPass = b
		case "failed_dimensions":
			list, ok := stringList(m.Val)
			if !ok {
				fe.add(m.Key, describe(m.Val), "must be an array of strings")
				continue
			}
			v.FailedDimensions = list
		default:
			fe.add(joinKey("", m.Key), "", "unknown field")
		}
	}
	for _, k := range verdictRequired {
		if !seen[k] {
			fe.add(k, "", "is required")
		}
	}
	v.validate(&fe)
	if err := fe.err(); err != nil {
		return nil, err
	}
	// The seed's verdict.schema.json holds too: nothing the parser took is outside it.
	for _, sv := range checkSchema(verdictSchema, body) {
		fe.add(sv.Path, "", "verdict schema: "+sv.Message)
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return v, nil
}

// parseDimensions reads the dimensions object, reporting type errors per field.
func parseDimensions(val any, fe *fieldErrs) map[string]DimensionScore {
	obj, ok := val.(jsonObject)
	if !ok {
		fe.add("dimensions", describe(val), "must be an object")
		return nil
	}
	dims := map[string]DimensionScore{}
	for _, d := range obj {
		p := joinKey("dimensions", d.Key)
		dobj, ok := d.Val.(jsonObject)
		if !ok {
			fe.add(p, describe(d.Val), "must be an object with score, anchor and evidence")
			continue
		}
		var ds DimensionScore
		have := map[string]bool{}
		for _, m := range dobj {
			have[m.Key] = true
			fp := joinKey(p, m.Key)
			switch m.Key {
			case "score":
				f, ok := numberValue(m.Val)
				if !ok {
					fe.add(fp, describe(m.Val), "must be the number 0, 0.5 or 1")
					continue
				}
				ds.Score = f
			case "anchor", "evidence":
				s, ok := m.Val.(string)
				if !ok {
					fe.add(fp, describe(m.Val), "must be a string")
					continue
				}
				if m.Key == "anchor" {
					ds.Anchor = s
				} else {
					ds.Evidence = s
				}
			default:
				fe.add(fp, "", "unknown field")
			}
		}
		for _, k := range []string{"score", "anchor", "evidence"} {
			if !have[k] {
				fe.add(joinKey(p, k), "", "is required")
			}
		}
		dims[d.Key] = ds
	}
	return dims
}

// Validate checks the values of a verdict (for one built in code, or after decoding):
// iteration >= 1, feature and target set, at least one dimension, each score exactly
// 0, 0.5 or 1, each anchor one of the three, evidence not blank, and no free-text field
// (evidence, notes, a failed dimension's name) longer than strictjson.MaxText
// characters. It returns a *VerdictError or nil.
func (v *Verdict) Validate() error {
	var fe fieldErrs
	v.validate(&fe)
	return fe.err()
}

func (v *Verdict) validate(fe *fieldErrs) {
	if v.Iteration < 1 {
		fe.add("iteration", strconv.Itoa(v.Iteration), "must be a whole number >= 1")
	}
	if strings.TrimSpace(v.Feature) == "" {
		fe.add("feature", strconv.Quote(v.Feature), "must not be blank")
	}
	if strings.TrimSpace(v.Target) == "" {
		fe.add("target", strconv.Quote(v.Target), "must not be blank")
	}
	if v.ReferenceSource != "" && v.ReferenceSource != SourceHuman && v.ReferenceSource != SourceCandidate {
		fe.add("reference_source", strconv.Quote(v.ReferenceSource), "must be human or candidate")
	}
	if len(v.Dimensions) == 0 {
		fe.add("dimensions", "", "must score at least one dimension")
	}
	names := make([]string, 0, len(v.Dimensions))
	for n := range v.Dimensions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := v.Dimensions[n]
		p := joinKey("dimensions", n)
		if n == "" {
			fe.add(p, "", "dimension name must not be empty")
		}
		if d.Score != 0 && d.Score != 0.5 && d.Score != 1 {
			fe.add(p+".score", strconv.FormatFloat(d.Score, 'g', -1, 64), "must be exactly 0, 0.5 or 1")
		}
		if !validAnchor(d.Anchor) {
			fe.add(p+".anchor", strconv.Quote(d.Anchor), "must be reference, design-system or spec-text")
		}
		if strings.TrimSpace(d.Evidence) == "" {
			fe.add(p+".evidence", strconv.Quote(d.Evidence), "must state the observation behind the score")
		}
		if reason := strictjson.TooLong(d.Evidence); reason != "" {
			fe.add(p+".evidence", strconv.Quote(strictjson.Clip(d.Evidence)), reason)
		}
	}
	if reason := strictjson.TooLong(v.Notes); reason != "" {
		fe.add("notes", strconv.Quote(strictjson.Clip(v.Notes)), reason)
	}
	for i, n := range v.FailedDimensions {
		if reason := strictjson.TooLong(n); reason != "" {
			fe.add(fmt.Sprintf("failed_dimensions[%d]", i), strconv.Quote(strictjson.Clip(n)), reason)
		}
	}
}

// stripFence trims whitespace and removes one enclosing Markdown code fence whose info
// string is empty or "json". A fence that does not enclose the whole answer is not
// removed, so prose around JSON stays a syntax error.
func stripFence(data []byte) ([]byte, error) {
	s := bytes.TrimSpace(data)
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: empty answer", ErrVerdictSyntax)
	}
	if !bytes.HasPrefix(s, []byte("```")) {
		return s, nil
	}
	first, rest, ok := bytes.Cut(s, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("%w: fence without content", ErrVerdictSyntax)
	}
	info := strings.TrimSpace(string(first[3:]))
	if info != "" && !strings.EqualFold(info, "json") {
		return nil, fmt.Errorf("%w: fence info %q, want json", ErrVerdictSyntax, info)
	}
	rest = bytes.TrimRight(rest, " \t\r\n")
	body, ok := bytes.CutSuffix(rest, []byte("```"))
	if !ok {
		return nil, fmt.Errorf("%w: unterminated fence", ErrVerdictSyntax)
	}
	return bytes.TrimSpace(body), nil
}

// VerdictCheck is the outcome of re-deriving a verdict from its scores.
type VerdictCheck struct {
	// Verdict is the corrected verdict: AllPass and FailedDimensions derived.
	Verdict Verdict `json:"verdict"`
	// Disagreed is set when the judge's own all_pass or failed_dimensions differed
	// from the derived ones; the aggregator counts these.
	Disagreed bool `json:"disagreed"`
	// ReportedAllPass and ReportedFailed keep the judge's claim for the audit log.
	ReportedAllPass bool `json:"reported_all_pass"`
	// ReportedFailed is the judge's failed_dimensions as sent.
	ReportedFailed []string `json:"reported_failed_dimensions"`
	// Disagreements says what differed, one sentence per field.
	Disagreements []string `json:"disagreements,omitempty"`
}

// NormalizeVerdict re-derives all_pass and failed_dimensions from the scores and the
// rubric's thresholds (a nil rubric means DefaultRubric), replaces the judge's values,
// and reports whether the judge's claim disagreed. The judge's aggregate is never
// used: a verdict is exactly as good as its scores.
//
// The verdict must also match the rubric: every rubric dimension scored, no dimension
// the rubric does not have, each anchored as the rubric says. A judge that scores
// something else, or the right thing against the wrong evidence, did not follow its
// instructions; such violations come back as a *VerdictError. failed_dimensions lists
// dimensions in the rubric's order.
func NormalizeVerdict(v Verdict, r *Rubric) (VerdictCheck, error) {
	if err := v.Validate(); err != nil {
		return VerdictCheck{}, err
	}
	if r == nil {
		r = DefaultRubric()
	}
	var fe fieldErrs
	names := r.DimensionNames()
	for _, n := range names {
		d, ok := v.Dimensions[n]
		if !ok {
			fe.add(joinKey("dimensions", n), "", "is required by the rubric")
			continue
		}
		if want := r.Dimensions[n].Anchor; d.Anchor != want {
			fe.add(joinKey("dimensions", n)+".anchor", strconv.Quote(d.Anchor), "the rubric anchors this dimension to "+want)
		}
	}
	extra := []string{}
	for n := range v.Dimensions {
		if _, ok := r.Dimensions[n]; !ok {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		fe.add(joinKey("dimensions", n), "", "is not a dimension of the rubric")
	}
	if err := fe.err(); err != nil {
		return VerdictCheck{}, err
	}

	failed := []string{}
	for _, n := range names {
		if v.Dimensions[n].Score < r.Threshold(n) {
			failed = append(failed, n)
		}
	}
	allPass := len(failed) == 0

	out := v
	out.Dimensions = make(map[string]DimensionScore, len(v.Dimensions))
	for k, d := range v.Dimensions {
		if d.Score == 0 {
			d.Score = 0 // normalise -0
		}
		out.Dimensions[k] = d
	}
	out.AllPass = allPass
	out.FailedDimensions = failed
	check := VerdictCheck{
		Verdict:         out,
		ReportedAllPass: v.AllPass,
		ReportedFailed:  append([]string{}, v.FailedDimensions...),
	}
	if v.AllPass != allPass {
		check.Disagreements = append(check.Disagreements,
			fmt.Sprintf("judge reported all_pass=%t, the scores give %t", v.AllPass, allPass))
	}
	if !sameSet(v.FailedDimensions, failed) {
		check.Disagreements = append(check.Disagreements,
			fmt.Sprintf("judge reported failed_dimensions %v, the scores give %v", v.FailedDimensions, failed))
	}
	check.Disagreed = len(check.Disagreements) > 0
	return check, nil
}

func sameSet(a, b []string) bool {
	as, bs := map[string]bool{}, map[string]bool{}
	for _, s := range a {
		as[s] = true
	}
	for _, s := range b {
		bs[s] = true
	}
	if len(as) != len(bs) {
		return false
	}
	for s := range as {
		if !bs[s] {
			return false
		}
	}
	return true
}

// SelfReportTally counts how often judged documents (verdicts, gate results) claimed
// an aggregate their own data did not support, a running measure of how far a judge
// or adapter can be trusted that the aggregator reports per judge.
type SelfReportTally struct {
	// Checked counts documents checked.
	Checked int `json:"checked"`
	// Disagreements counts those whose own aggregate was wrong.
	Disagreements int `json:"disagreements"`
}

// Add counts one checked document.
func (t *SelfReportTally) Add(disagreed bool) {
	t.Checked++
	if disagreed {
		t.Disagreements++
	}
}
