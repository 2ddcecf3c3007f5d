package argus

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
	"github.com/tribunal-dev/tribunal/schemas"
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

// fieldErrs accumulates violations, keeping only the first per field.
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

// verdictBounds is what tribunal adds to the seed's verdict.schema.json, which it merges
// into (mergeSchema): identity fields that say something, evidence that states an
// observation, named dimensions, and every free-text field (evidence, notes, a failed
// dimension's name) capped at strictjson.MaxText characters, so no verdict is too large
// to record. The seed's schema holds for every verdict tribunal accepts: nothing here
// relaxes it.
const verdictBounds = `{
  "properties": {
    "feature": {"pattern": "\\S"},
    "target": {"pattern": "\\S"},
    "dimensions": {
      "propertyNames": {"minLength": 1},
      "additionalProperties": {"properties": {"evidence": {"pattern": "\\S", "maxLength": 2000}}}
    },
    "failed_dimensions": {"items": {"maxLength": 2000}},
    "notes": {"maxLength": 2000}
  }
}`

// verdictTree is the verdict's one schema: the seed's text with verdictBounds merged in.
var verdictTree = mustMerge(schemas.ArgusVerdict, []byte(verdictBounds))

var verdictReasons = map[string]string{
	"dimensions minProperties":      "must score at least one dimension",
	"dimensions propertyNames":      "dimension name must not be empty",
	"dimensions.*.evidence pattern": "must state the observation behind the score",
}

var verdictContract = mustVerdictContract(verdictTree, verdictReasons)

func mustVerdictContract(tree strictjson.Members, reasons map[string]string) *strictjson.Contract {
	doc, err := json.Marshal(tree)
	if err != nil {
		panic(fmt.Sprintf("verdict schema: %v", err))
	}
	return strictjson.MustCompile(strictjson.Spec{Doc: fieldDoc, Schema: doc,
		Fence: strictjson.FenceTolerated, Reasons: reasons})
}

// ParseVerdict parses the judge's answer against the verdict schema (the seed's
// verdict.schema.json with verdictBounds). The answer must be one JSON object, optionally
// wrapped in a single ```json fence (models add one even when asked not to, and it
// carries no meaning), with no key repeated. Every violation is collected into a
// *VerdictError: unknown or duplicate fields, missing required fields, wrong types,
// scores other than exactly 0, 0.5 or 1, anchors outside reference|design-system|
// spec-text, blank evidence, iteration below 1. An integral iteration in any spelling
// (3.0) is the whole number it spells, as the seed's JSON Schema has it. A verdict with
// any violation is rejected whole; nothing is salvaged from it.
func ParseVerdict(data []byte) (*Verdict, error) {
	return decodeVerdict(verdictContract, data, nil)
}

func decodeVerdict(c *strictjson.Contract, data []byte, edit func(strictjson.Members) strictjson.Members) (*Verdict, error) {
	v := &Verdict{}
	if err := c.DecodeEdited(data, edit, v); err != nil {
		return nil, asVerdictError(err)
	}
	return v, nil
}

// asVerdictError gives a contract's violations this package's collecting type.
func asVerdictError(err error) error {
	var inv *strictjson.Invalid
	if errors.As(err, &inv) {
		return &VerdictError{Fields: inv.Fields}
	}
	return err
}

// Validate checks a verdict (one built in code, or a recorded one) against the verdict
// schema: iteration >= 1, feature and target set, at least one dimension, each score
// exactly 0, 0.5 or 1, each anchor one of the three, evidence not blank, free text within
// strictjson.MaxText characters, failed_dimensions a list. It returns a *VerdictError or
// nil.
func (v *Verdict) Validate() error {
	return asVerdictError(verdictContract.Validate(v))
}

// ViewIdentity is what the judge service states about a verdict rather than the model:
// which view and iteration it is for.
type ViewIdentity struct {
	Iteration                                           int
	Feature, Target, State, Appearance, ReferenceSource string
}

// JudgeVerdictSchema is the verdict schema the rubric judge is sent for rubric r (nil:
// DefaultRubric): the verdict schema with r's dimensions spelled out, each anchored as r
// says, every property required.
func JudgeVerdictSchema(r *Rubric) []byte { return rubricContract(r).Sent() }

// ParseJudgeVerdict parses the rubric judge's answer for rubric r against the schema it
// was sent (JudgeVerdictSchema): the view's identity is put in place of whatever the model
// said about it before the check, so a model cannot misfile its verdict; then every rubric
// dimension must be scored, no other, each against its anchor. Errors are as ParseVerdict's.
func ParseJudgeVerdict(r *Rubric, id ViewIdentity, data []byte) (*Verdict, error) {
	return decodeVerdict(rubricContract(r), data, func(o strictjson.Members) strictjson.Members {
		o = o.Set("iteration", json.Number(strconv.Itoa(id.Iteration)))
		for _, f := range []struct{ key, val string }{{"feature", id.Feature}, {"target", id.Target}, {"state", id.State},
			{"appearance", id.Appearance}, {"reference_source", id.ReferenceSource}} {
			o = o.Set(f.key, f.val)
		}
		return o
	})
}

// rubricContracts holds each rubric's verdict contract, compiled once. A process judges
// against a handful of rubrics; the bound only keeps a stream of distinct ones from
// growing it without end.
var rubricContracts = struct {
	sync.Mutex
	m map[string]*strictjson.Contract
}{m: map[string]*strictjson.Contract{}}

func rubricContract(r *Rubric) *strictjson.Contract {
	if r == nil {
		r = DefaultRubric()
	}
	names := r.DimensionNames()
	var key strings.Builder
	for _, n := range names {
		key.WriteString(strconv.Quote(n) + "=" + r.Dimensions[n].Anchor + ";")
	}
	rubricContracts.Lock()
	defer rubricContracts.Unlock()
	if c, ok := rubricContracts.m[key.String()]; ok {
		return c
	}
	reasons := maps.Clone(verdictReasons)
	for _, n := range names {
		p := strictjson.JoinKey("dimensions", n)
		reasons[p+" required"] = "is required by the rubric"
		reasons[p+".anchor enum"] = "the rubric anchors this dimension to " + r.Dimensions[n].Anchor
		reasons[p+".evidence pattern"] = verdictReasons["dimensions.*.evidence pattern"]
	}
	c := mustVerdictContract(forRubric(verdictTree, r, names), reasons)
	if len(rubricContracts.m) >= 64 {
		clear(rubricContracts.m)
	}
	rubricContracts.m[key.String()] = c
	return c
}

// forRubric is the verdict schema with dimensions fixed to the rubric's: each one
// required, anchored as the rubric says, and no other.
func forRubric(tree strictjson.Members, r *Rubric, names []string) strictjson.Members {
	props, _ := tree.Get("properties")
	dims, _ := props.(strictjson.Members).Get("dimensions")
	each, _ := dims.(strictjson.Members).Get("additionalProperties")
	fixed := strictjson.Members{}
	for _, n := range names {
		d := each.(strictjson.Members)
		dp, _ := d.Get("properties")
		anchor, _ := dp.(strictjson.Members).Get("anchor")
		anchor = anchor.(strictjson.Members).Set("enum", []any{r.Dimensions[n].Anchor})
		fixed = append(fixed, strictjson.Member{Key: n, Val: d.Set("properties", dp.(strictjson.Members).Set("anchor", anchor))})
	}
	required := make([]any, len(names))
	for i, n := range names {
		required[i] = n
	}
	var out strictjson.Members
	for _, m := range dims.(strictjson.Members) {
		switch m.Key {
		case "minProperties", "propertyNames", "additionalProperties":
			continue
		}
		out = append(out, m)
	}
	out = append(out, strictjson.Member{Key: "additionalProperties", Val: false},
		strictjson.Member{Key: "required", Val: required}, strictjson.Member{Key: "properties", Val: fixed})
	return tree.Set("properties", props.(strictjson.Members).Set("dimensions", out))
}

// mustMerge merges a schema overlay into a schema: objects member by member, anything
// else replaced by the overlay's value.
func mustMerge(base, overlay []byte) strictjson.Members {
	b, err := strictjson.DecodeTree(base, true)
	if err != nil {
		panic(fmt.Sprintf("verdict schema: %v", err))
	}
	o, err := strictjson.DecodeTree(overlay, true)
	if err != nil {
		panic(fmt.Sprintf("verdict schema bounds: %v", err))
	}
	return merge(b, o).(strictjson.Members)
}

func merge(base, over any) any {
	bo, ok1 := base.(strictjson.Members)
	oo, ok2 := over.(strictjson.Members)
	if !ok1 || !ok2 {
		return over
	}
	out := append(strictjson.Members(nil), bo...)
	for _, m := range oo {
		if prev, ok := out.Get(m.Key); ok {
			out = out.Set(m.Key, merge(prev, m.Val))
		} else {
			out = append(out, m)
		}
	}
	return out
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
