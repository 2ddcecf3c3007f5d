package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	segjson "github.com/segmentio/encoding/json"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tribunal-dev/tribunal/pkg/fielderr"
)

// FencePolicy says whether an answer may arrive inside a Markdown code fence.
type FencePolicy int

const (
	// FenceTolerated removes one ``` or ```json fence wrapping the whole answer (Unfence):
	// models add one even when told not to, and it carries no meaning.
	FenceTolerated FencePolicy = iota
	// FenceRefused makes any fence a syntax error, for a contract that says "no code fence".
	FenceRefused
)

// Spec is what a kind says about its answer. The schema is the whole contract: shape,
// types, enums, ranges, lengths and unknown keys are all in it, and Contract holds every
// answer to it. The other fields only say how a violation reads.
type Spec struct {
	// Doc names the document in field errors ("ab verdict", "critic").
	Doc string
	// Schema is the answer's JSON Schema as tribunal accepts it. What is sent to the model
	// is the same schema with every property required (Contract.Sent).
	Schema []byte
	// Fence says whether one code fence around the answer is tolerated.
	Fence FencePolicy
	// Hints give the reason for an unknown key that is a known mistake, by its field path
	// ("preferred", "efficiency_signal.gain"), so the repair re-ask says how to fix it.
	Hints map[string]string
	// Reasons replace the reason a keyword's failure would get at one field, keyed by the
	// field's pattern and the keyword: "rationale pattern", "dimensions.*.evidence
	// pattern" (a name under additionalProperties is written *, an array item []).
	Reasons map[string]string
	// LateRequired are required fields whose absence is reported after every other
	// violation (so a wrong value is not hidden behind a missing claim) and tolerated by
	// Validate, since a recorded value may predate them.
	LateRequired []string
	// WholeLiterals makes "integer" mean an integer literal: 7.0 and 7e0 are refused like
	// 7.5, because a model that writes a fraction is not using a whole-number scale.
	// Without it an integral number in any spelling is a whole number, as JSON Schema has it.
	WholeLiterals bool
}

// Contract is one answer's specification compiled once: the schema sent to the model and
// the validator of what comes back. Its methods are safe for concurrent use.
type Contract struct {
	spec   Spec
	schema *jsonschema.Schema
	sent   json.RawMessage
	nodes  map[string]*node // by absolute schema location
	late   map[string]bool
	// integers is set when some field is typed integer, so literals has work to do.
	integers bool
}

// node is what a violation needs of one schema in the contract.
type node struct {
	s *jsonschema.Schema
	// pattern is the field path the schema applies to, names under additionalProperties
	// written * and array items [].
	pattern string
	// order is the field's place in the schema's declaration order.
	order int
	// what describes a valid value ("a whole number from 0 to 10").
	what string
}

const contractURL = "https://tribunal.invalid/answer.schema.json"

// Compile compiles a contract. The schema must be one JSON object.
func Compile(spec Spec) (*Contract, error) {
	raw, err := DecodeTree(spec.Schema, true)
	if err != nil {
		return nil, fmt.Errorf("answer schema of %s: %w", spec.Doc, err)
	}
	tree, ok := raw.(Members)
	if !ok {
		return nil, fmt.Errorf("answer schema of %s: %s, not an object", spec.Doc, KindOf(raw))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Schema))
	if err != nil {
		return nil, fmt.Errorf("answer schema of %s: %w", spec.Doc, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(contractURL, doc); err != nil {
		return nil, fmt.Errorf("answer schema of %s: %w", spec.Doc, err)
	}
	s, err := c.Compile(contractURL)
	if err != nil {
		return nil, fmt.Errorf("answer schema of %s: %w", spec.Doc, err)
	}
	compact, err := marshal(strictForm(tree))
	if err != nil {
		return nil, fmt.Errorf("answer schema of %s: %w", spec.Doc, err)
	}
	var sent bytes.Buffer
	if err := json.Indent(&sent, compact, "", "  "); err != nil {
		return nil, fmt.Errorf("answer schema of %s: %w", spec.Doc, err)
	}
	k := &Contract{spec: spec, schema: s, sent: sent.Bytes(), nodes: map[string]*node{}, late: map[string]bool{}}
	order := map[string]int{}
	declOrder(tree, "", order)
	k.index(s, "", order, map[*jsonschema.Schema]bool{})
	for _, f := range spec.LateRequired {
		k.late[f] = true
	}
	return k, nil
}

// MustCompile is Compile for a schema built into the binary: an error is a programming
// error, found by any test that loads the package.
func MustCompile(spec Spec) *Contract {
	c, err := Compile(spec)
	if err != nil {
		panic(err)
	}
	return c
}

// Sent is the schema to send for structured output: the contract's schema with every
// property of every object required and $schema and $id left out. Strict servers want
// every property required; asking for the optional ones too costs nothing, and an answer
// recorded without them stays valid. The caller may keep or change the bytes.
func (c *Contract) Sent() json.RawMessage { return append(json.RawMessage(nil), c.sent...) }

// Invalid is every violation found in one answer, in the order they are reported:
// unknown keys, then missing fields and wrong types, then wrong values, each group in the
// schema's field order. Every field is reported once.
type Invalid struct {
	Fields []*fielderr.Error
	// shape is set when the answer's shape is wrong (an unknown, missing or mistyped
	// field), so nothing could be decoded from it.
	shape bool
}

// Error lists every violation on one line.
func (e *Invalid) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap exposes the field errors to errors.As and errors.Is.
func (e *Invalid) Unwrap() []error {
	out := make([]error, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f
	}
	return out
}

// First returns the first field error of an *Invalid, and any other error as it is: for
// a kind that reports one violation at a time.
func First(err error) error {
	var inv *Invalid
	if errors.As(err, &inv) && len(inv.Fields) > 0 {
		return inv.Fields[0]
	}
	return err
}

// Decode checks data against the contract and decodes it into dst, a pointer to the
// kind's answer struct. The text must be one JSON object (in one code fence when the
// spec tolerates it) with no key repeated at any level; then the decoded tree is validated
// by the compiled schema. Errors wrap ErrNotObject for text that is not one object, and are
// an *Invalid otherwise. When only values are wrong (the shape is right), dst is still
// decoded, so the caller can record what the judge said; it must never be used as an
// answer. On every other error dst is left as it was.
func (c *Contract) Decode(data []byte, dst any) error { return c.DecodeEdited(data, nil, dst) }

// DecodeEdited is Decode with edit applied to the top-level object before it is checked:
// for fields the caller states rather than the model (a view's identity).
func (c *Contract) DecodeEdited(data []byte, edit func(Members) Members, dst any) error {
	body, err := c.unfence(data)
	if err != nil {
		return err
	}
	tree, err := DecodeTree(body, true)
	if err != nil {
		var dup *DuplicateKeyError
		if errors.As(err, &dup) {
			return &Invalid{shape: true, Fields: []*fielderr.Error{{Doc: c.spec.Doc, Field: dup.Path, Reason: "duplicate field"}}}
		}
		if se := (*SyntaxError)(nil); errors.As(err, &se) {
			return c.syntax(se.Detail)
		}
		return c.syntax(err.Error())
	}
	obj, ok := tree.(Members)
	if !ok {
		return c.syntax("got " + KindOf(tree))
	}
	if edit != nil {
		obj, body = edit(obj), nil
	}
	inv, normalized := c.check(obj, false)
	if inv != nil && inv.shape {
		return inv
	}
	if normalized {
		body = nil
	}
	if err := c.decodeInto(obj, body, dst); err != nil && inv == nil {
		return err
	}
	if inv != nil {
		return inv
	}
	return nil
}

// Validate checks a value of the kind's answer struct (a recorded answer, or one built in
// code) against the contract, as it would be written in JSON. Fields in LateRequired may
// be absent. It returns an *Invalid or nil.
func (c *Contract) Validate(v any) error {
	if path, bad, ok := nonFinite(reflect.ValueOf(v), ""); ok {
		return &Invalid{Fields: []*fielderr.Error{{Doc: c.spec.Doc, Field: path, Value: bad, Reason: "must be " + c.whatAt(path)}}}
	}
	if tree, ok := treeOf(reflect.ValueOf(v)); ok {
		obj, isObj := tree.(Members)
		if !isObj {
			return &Invalid{shape: true, Fields: []*fielderr.Error{{Doc: c.spec.Doc, Field: "(root)", Reason: "must be an object"}}}
		}
		if inv, _ := c.check(obj, true); inv != nil {
			return inv
		}
		return nil
	}
	body, err := json.Marshal(v)
	if err != nil {
		if path, bad, ok := nonFinite(reflect.ValueOf(v), ""); ok {
			return &Invalid{Fields: []*fielderr.Error{{Doc: c.spec.Doc, Field: path, Value: bad, Reason: "must be " + c.whatAt(path)}}}
		}
		return fmt.Errorf("%s: %w", c.spec.Doc, err)
	}
	tree, err := DecodeTree(body, true)
	if err != nil {
		return fmt.Errorf("%s: %w", c.spec.Doc, err)
	}
	obj, ok := tree.(Members)
	if !ok {
		return &Invalid{shape: true, Fields: []*fielderr.Error{{Doc: c.spec.Doc, Field: "(root)", Value: Clip(string(body)), Reason: "must be an object"}}}
	}
	if inv, _ := c.check(obj, true); inv != nil {
		return inv
	}
	return nil
}

// syntax is the error for an answer that is not one JSON object: ErrNotObject, in the
// words of the document it was meant to be, with what is wrong for the repair re-ask.
func (c *Contract) syntax(detail string) error {
	return fmt.Errorf("%s: %w: %s", c.spec.Doc, ErrNotObject, detail)
}

// unfence applies the fence policy: the body to decode, or a syntax error.
func (c *Contract) unfence(data []byte) ([]byte, error) {
	if c.spec.Fence == FenceRefused {
		body := bytes.TrimSpace(data)
		switch {
		case len(body) == 0:
			return nil, c.syntax("empty answer")
		case bytes.HasPrefix(body, []byte("```")):
			return nil, c.syntax("the answer is wrapped in a code fence; return the JSON object alone, no code fence")
		}
		return body, nil
	}
	body, err := Unfence(data)
	var se *SyntaxError
	if errors.As(err, &se) {
		return nil, c.syntax(se.Detail)
	}
	return body, err
}

// decodeInto decodes the checked answer into a fresh value of dst's type and stores it
// only when that succeeds. body is the answer's text when the tree is unchanged from it.
func (c *Contract) decodeInto(obj Members, body []byte, dst any) error {
	if body == nil {
		var err error
		if body, err = marshal(obj); err != nil {
			return fmt.Errorf("%s: %w", c.spec.Doc, err)
		}
	}
	pv := reflect.ValueOf(dst)
	if pv.Kind() != reflect.Pointer || pv.IsNil() {
		return fmt.Errorf("%s: decode into %T, not a pointer", c.spec.Doc, dst)
	}
	fresh := reflect.New(pv.Elem().Type())
	// segmentio's decoder gives encoding/json's values at a fraction of the cost; a text it
	// refuses is decoded again by encoding/json, whose error names the field.
	if segjson.Unmarshal(body, fresh.Interface()) == nil {
		pv.Elem().Set(fresh.Elem())
		return nil
	}
	fresh = reflect.New(pv.Elem().Type())
	if err := json.Unmarshal(body, fresh.Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &Invalid{shape: true, Fields: []*fielderr.Error{{Doc: c.spec.Doc, Field: te.Field, Value: Clip(te.Value), Reason: "is out of range (must be " + c.whatAt(te.Field) + ")"}}}
		}
		return fmt.Errorf("%s: %w", c.spec.Doc, err)
	}
	pv.Elem().Set(fresh.Elem())
	return nil
}

// Phases of a violation, the first sort key of a report.
const (
	phaseUnknown = iota // a key the schema does not have
	phaseShape          // a missing field, a wrong type
	phaseValue          // a value out of its enum, range, length or pattern
	phaseLate           // a LateRequired field missing
)

type violation struct {
	phase, order, sub int
	err               *fielderr.Error
}

// check validates a decoded object and returns its violations (nil when there are none)
// and whether integral numbers at integer fields were rewritten as integer literals.
func (c *Contract) check(obj Members, recorded bool) (*Invalid, bool) {
	var vs []violation
	normalized := c.literals(obj, c.schema, nil, &vs)
	if err := c.schema.Validate(instance(obj)); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			vs = append(vs, violation{phase: phaseShape, err: &fielderr.Error{Doc: c.spec.Doc, Field: "(root)", Reason: err.Error()}})
		} else {
			c.collect(ve, obj, &vs)
		}
	}
	if len(vs) == 0 {
		return nil, normalized
	}
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if a.phase != b.phase {
			return a.phase < b.phase
		}
		if a.order != b.order {
			return a.order < b.order
		}
		return a.sub < b.sub
	})
	inv := &Invalid{}
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.err.Field] || (recorded && v.phase == phaseLate) {
			continue
		}
		seen[v.err.Field] = true
		inv.Fields = append(inv.Fields, v.err)
		inv.shape = inv.shape || v.phase < phaseValue
	}
	if len(inv.Fields) == 0 {
		return nil, normalized
	}
	return inv, normalized
}

// literals walks the object beside its schema and, at every field typed integer, refuses
// (WholeLiterals) or rewrites a number written with a fraction or an exponent. The
// schema library sees only the number's value, so 7.0 would pass it as 7.
func (c *Contract) literals(v any, s *jsonschema.Schema, at *pathNode, vs *[]violation) (changed bool) {
	if !c.integers {
		return false
	}
	for s != nil && s.Ref != nil && s.Types == nil && len(s.Properties) == 0 {
		s = s.Ref
	}
	if s == nil {
		return false
	}
	switch t := v.(type) {
	case Members:
		for i := range t {
			m := &t[i]
			sub := s.Properties[m.Key]
			if sub == nil {
				sub, _ = s.AdditionalProperties.(*jsonschema.Schema)
			}
			if c.literalAt(&m.Val, sub, &pathNode{up: at, key: m.Key, index: -1}, vs) {
				changed = true
			}
		}
	case []any:
		item := s.Items2020
		if item == nil {
			item, _ = s.Items.(*jsonschema.Schema)
		}
		for i := range t {
			if c.literalAt(&t[i], item, &pathNode{up: at, index: i}, vs) {
				changed = true
			}
		}
	}
	return changed
}

func (c *Contract) literalAt(v *any, s *jsonschema.Schema, at *pathNode, vs *[]violation) bool {
	if s == nil {
		return false
	}
	n, ok := (*v).(json.Number)
	if !ok {
		return c.literals(*v, s, at, vs)
	}
	types := s.Types
	if types == nil && s.Ref != nil {
		types = s.Ref.Types
	}
	if types == nil || !slices.Contains(types.ToStrings(), "integer") || slices.Contains(types.ToStrings(), "number") ||
		!strings.ContainsAny(string(n), ".eE") {
		return false
	}
	if c.spec.WholeLiterals {
		nd := c.nodes[s.Location]
		what, order := "a whole number", math.MaxInt
		if nd != nil {
			what, order = nd.what, nd.order
		}
		*vs = append(*vs, violation{phase: phaseShape, order: order, err: &fielderr.Error{Doc: c.spec.Doc, Field: at.String(), Value: Clip(string(n)),
			Reason: c.reason(nd, "type", "must be "+what+", not a fraction")}})
		return false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() {
		return false // not a whole number at all: the schema's type check reports it
	}
	*v = json.Number(r.Num().String())
	return true
}

// collect turns a validation error tree into violations.
func (c *Contract) collect(ve *jsonschema.ValidationError, obj Members, vs *[]violation) {
	if pn, ok := ve.ErrorKind.(*kind.PropertyNames); ok {
		path, _ := locate(obj, ve.InstanceLocation)
		nd := c.nodes[ve.SchemaURL]
		*vs = append(*vs, violation{phase: phaseValue, order: orderOf(nd), err: &fielderr.Error{Doc: c.spec.Doc, Field: JoinKey(path, pn.Property),
			Reason: c.reason(nd, "propertyNames", "is not an allowed name")}})
		return
	}
	if len(ve.Causes) > 0 {
		for _, cause := range ve.Causes {
			c.collect(cause, obj, vs)
		}
		return
	}
	path, val := locate(obj, ve.InstanceLocation)
	nd := c.nodes[ve.SchemaURL]
	add := func(phase, order, sub int, field, value, reason string) {
		if field == "" {
			field = "(root)"
		}
		*vs = append(*vs, violation{phase: phase, order: order, sub: sub, err: &fielderr.Error{Doc: c.spec.Doc, Field: field, Value: value, Reason: reason}})
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			child := c.child(nd, name)
			field, phase := JoinKey(path, name), phaseShape
			if child != nil && c.late[child.pattern] {
				phase = phaseLate
			}
			add(phase, orderOf(child), 0, field, "", c.reason(child, "required", "missing"))
		}
	case *kind.AdditionalProperties:
		parent, _ := val.(Members)
		for _, name := range k.Properties {
			reason := "unknown field"
			if nd != nil {
				if h, ok := c.spec.Hints[JoinKey(nd.pattern, name)]; ok {
					reason = h
				}
			}
			add(phaseUnknown, orderOf(nd), memberIndex(parent, name), JoinKey(path, name), "", reason)
		}
	case *kind.Type:
		add(phaseShape, orderOf(nd), 1, path, valueText(val), c.reason(nd, "type", "must be "+whatOf(nd)))
	case *kind.MinLength:
		r := fmt.Sprintf("must be at least %d characters", k.Want)
		if k.Want == 1 {
			r = "must not be empty"
		}
		add(phaseValue, orderOf(nd), 0, path, valueText(val), c.reason(nd, "minLength", r))
	case *kind.MaxLength:
		add(phaseValue, orderOf(nd), 0, path, valueText(val), c.reason(nd, "maxLength", fmt.Sprintf("must be at most %d characters, not %d", k.Want, k.Got)))
	case *kind.Pattern:
		r := "must match " + k.Want
		if k.Want == `\S` {
			r = "must not be blank"
		}
		add(phaseValue, orderOf(nd), 0, path, valueText(val), c.reason(nd, "pattern", r))
	case *kind.MinProperties:
		add(phaseValue, orderOf(nd), 0, path, "", c.reason(nd, "minProperties", fmt.Sprintf("must have at least %d member(s)", k.Want)))
	case *kind.Enum, *kind.Const, *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum, *kind.ExclusiveMaximum, *kind.MultipleOf:
		add(phaseValue, orderOf(nd), 0, path, valueText(val), c.reason(nd, ve.ErrorKind.KeywordPath()[0], "must be "+whatOf(nd)))
	default:
		add(phaseValue, orderOf(nd), 0, path, valueText(val), ve.ErrorKind.LocalizedString(printer))
	}
}

var printer = message.NewPrinter(language.English)

// reason is the Reasons entry for keyword at nd's field, else def.
func (c *Contract) reason(nd *node, keyword, def string) string {
	if nd != nil {
		if r, ok := c.spec.Reasons[nd.pattern+" "+keyword]; ok {
			return r
		}
	}
	return def
}

// child is the node of property name under nd.
func (c *Contract) child(nd *node, name string) *node {
	if nd == nil {
		return nil
	}
	if s := nd.s.Properties[name]; s != nil {
		return c.nodes[s.Location]
	}
	return nil
}

// whatAt describes the field at a dotted path (Go's json errors and Validate name fields
// that way), or says "a valid value" when the path does not lead to a field.
func (c *Contract) whatAt(path string) string {
	s := c.schema
	for _, part := range strings.Split(path, ".") {
		if part == "" || s == nil {
			continue
		}
		name, _, _ := strings.Cut(part, "[")
		next := s.Properties[name]
		if next == nil {
			next, _ = s.AdditionalProperties.(*jsonschema.Schema)
		}
		s = next
	}
	if nd := c.nodesOf(s); nd != nil {
		return nd.what
	}
	return "a valid value"
}

func (c *Contract) nodesOf(s *jsonschema.Schema) *node {
	if s == nil {
		return nil
	}
	return c.nodes[s.Location]
}

// index records every schema of the contract by location, with its field pattern, its
// declaration order and a description of what it accepts.
func (c *Contract) index(s *jsonschema.Schema, pattern string, order map[string]int, seen map[*jsonschema.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	o, ok := order[fragment(s.Location)]
	if !ok {
		o = math.MaxInt
	}
	c.nodes[s.Location] = &node{s: s, pattern: pattern, order: o, what: describe(s)}
	if s.Types != nil && slices.Contains(s.Types.ToStrings(), "integer") {
		c.integers = true
	}
	for name, p := range s.Properties {
		c.index(p, JoinKey(pattern, name), order, seen)
	}
	if ap, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		c.index(ap, pattern+".*", order, seen)
	}
	if it, ok := s.Items.(*jsonschema.Schema); ok {
		c.index(it, pattern+"[]", order, seen)
	}
	c.index(s.Items2020, pattern+"[]", order, seen)
	c.index(s.PropertyNames, pattern, order, seen)
	c.index(s.Ref, pattern, order, seen)
}

// declOrder numbers the schema's subschemas in the order they are written, by JSON pointer.
func declOrder(s Members, ptr string, order map[string]int) {
	if _, ok := order[ptr]; !ok {
		order[ptr] = len(order)
	}
	for _, m := range s {
		switch m.Key {
		case "properties":
			props, _ := m.Val.(Members)
			for _, p := range props {
				if sub, ok := p.Val.(Members); ok {
					declOrder(sub, ptr+"/properties/"+escapePointer(p.Key), order)
				}
			}
		case "additionalProperties", "items", "propertyNames":
			if sub, ok := m.Val.(Members); ok {
				declOrder(sub, ptr+"/"+m.Key, order)
			}
		}
	}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// fragment is the JSON pointer of a schema location ("" for the root).
func fragment(loc string) string {
	_, f, _ := strings.Cut(loc, "#")
	return f
}

func orderOf(nd *node) int {
	if nd == nil {
		return math.MaxInt
	}
	return nd.order
}

func whatOf(nd *node) string {
	if nd == nil {
		return "a valid value"
	}
	return nd.what
}

// describe says what a schema accepts, for "must be ..." reasons.
func describe(s *jsonschema.Schema) string {
	for s.Ref != nil && s.Types == nil && s.Enum == nil && s.Const == nil {
		s = s.Ref
	}
	switch {
	case s.Enum != nil:
		alts := make([]string, len(s.Enum.Values))
		for i, v := range s.Enum.Values {
			alts[i] = literalText(v)
		}
		return orList(alts)
	case s.Const != nil:
		return literalText(*s.Const)
	case s.Types == nil:
		return "a valid value"
	}
	var phrases []string
	types := s.Types.ToStrings()
	has := func(t string) bool { return slices.Contains(types, t) }
	if has("boolean") {
		phrases = append(phrases, "true", "false")
	}
	switch {
	case has("number"):
		phrases = append(phrases, "a number"+numberRange(s, true))
	case has("integer"):
		phrases = append(phrases, "a whole number"+numberRange(s, false))
	}
	if has("string") {
		phrases = append(phrases, "a string")
	}
	if has("array") {
		p := "an array"
		if it := itemsOf(s); it != nil && it.Types != nil && len(it.Types.ToStrings()) == 1 && it.Types.ToStrings()[0] == "string" {
			p += " of strings"
		}
		phrases = append(phrases, p)
	}
	if has("object") {
		phrases = append(phrases, "an object")
	}
	if has("null") {
		phrases = append(phrases, "null")
	}
	return orList(phrases)
}

func itemsOf(s *jsonschema.Schema) *jsonschema.Schema {
	if s.Items2020 != nil {
		return s.Items2020
	}
	it, _ := s.Items.(*jsonschema.Schema)
	return it
}

// numberRange renders a schema's bounds: " in [0,1]" for a number, " from 1 to 5" or
// " >= 1" for a whole number.
func numberRange(s *jsonschema.Schema, interval bool) string {
	lo, hi := s.Minimum, s.Maximum
	switch {
	case lo != nil && hi != nil && interval:
		return " in [" + ratText(lo) + "," + ratText(hi) + "]"
	case lo != nil && hi != nil:
		return " from " + ratText(lo) + " to " + ratText(hi)
	case lo != nil:
		return " >= " + ratText(lo)
	case hi != nil:
		return " <= " + ratText(hi)
	}
	return ""
}

func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func literalText(v any) string {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// orList joins alternatives: `"A", "B" or "tie"`.
func orList(items []string) string {
	switch len(items) {
	case 0:
		return "a valid value"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// locate follows an instance location through the tree: the field path in tribunal's
// notation and the value there (nil when the location is not in the tree).
func locate(obj Members, tokens []string) (string, any) {
	var cur any = obj
	path := ""
	for _, t := range tokens {
		switch v := cur.(type) {
		case Members:
			path = JoinKey(path, t)
			cur, _ = v.Get(t)
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) {
				return JoinKey(path, t), nil
			}
			path = JoinIndex(path, i)
			cur = v[i]
		default:
			return JoinKey(path, t), nil
		}
	}
	return path, cur
}

func memberIndex(o Members, key string) int {
	for i, m := range o {
		if m.Key == key {
			return i
		}
	}
	return len(o)
}

// valueText renders an offending value for an error, bounded (Clip): strings quoted,
// everything else as JSON.
func valueText(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(Clip(t))
	case json.Number:
		return Clip(string(t))
	}
	b, err := marshal(v)
	if err != nil {
		return ""
	}
	return Clip(string(b))
}

// instance converts a decoded tree to the schema library's form (objects as maps; the
// duplicate-key check has already run, so nothing is lost).
func instance(v any) any {
	switch t := v.(type) {
	case Members:
		m := make(map[string]any, len(t))
		for _, mem := range t {
			m[mem.Key] = instance(mem.Val)
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = instance(e)
		}
		return out
	}
	return v
}

// strictForm is the sent schema: every object's properties all required, and no $schema
// or $id (the schema travels inside a request, not as a document of its own).
func strictForm(v any) any {
	t, ok := v.(Members)
	if !ok {
		return v
	}
	props, _ := t.Get("properties")
	names, hasProps := props.(Members)
	out := make(Members, 0, len(t)+1)
	required := func() Member {
		list := make([]any, len(names))
		for i, p := range names {
			list[i] = p.Key
		}
		return Member{Key: "required", Val: list}
	}
	wrote := false
	for _, m := range t {
		switch m.Key {
		case "$schema", "$id":
			continue
		case "required":
			if hasProps {
				if !wrote {
					out, wrote = append(out, required()), true
				}
				continue
			}
		case "properties":
			if !wrote {
				out, wrote = append(out, required()), true
			}
			sub := make(Members, len(names))
			for i, p := range names {
				sub[i] = Member{Key: p.Key, Val: strictForm(p.Val)}
			}
			out = append(out, Member{Key: m.Key, Val: sub})
			continue
		case "additionalProperties", "items", "propertyNames":
			out = append(out, Member{Key: m.Key, Val: strictForm(m.Val)})
			continue
		}
		out = append(out, m)
	}
	return out
}

// MarshalJSON writes the object with its keys in document order. Like every JSON this
// package writes, it leaves <, > and & as they are: a schema's text is read by people and
// models, not embedded in HTML.
func (o Members) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(m.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(m.Val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Set returns the object with key set to val: the first member of that name replaced,
// any later one dropped, or a new member appended.
func (o Members) Set(key string, val any) Members {
	out := make(Members, 0, len(o)+1)
	done := false
	for _, m := range o {
		if m.Key != key {
			out = append(out, m)
			continue
		}
		if !done {
			out, done = append(out, Member{Key: key, Val: val}), true
		}
	}
	if !done {
		out = append(out, Member{Key: key, Val: val})
	}
	return out
}
