package strictjson

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/fielderr"
)

const testSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["label", "score"],
  "properties": {
    "label": {"type": "string", "enum": ["yes", "no"]},
    "score": {"type": "integer", "minimum": 0, "maximum": 10},
    "claim": {"type": "integer", "minimum": 0, "maximum": 10},
    "note": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "\\S"},
    "share": {"type": "number", "minimum": 0, "maximum": 1},
    "inner": {
      "type": "object",
      "additionalProperties": false,
      "required": ["n"],
      "properties": {"n": {"type": "integer", "minimum": 1}}
    },
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
    "flag": {"type": ["boolean", "null"]}
  }
}`

type testAnswer struct {
	Label string           `json:"label"`
	Score int              `json:"score"`
	Claim *int             `json:"claim,omitempty"`
	Note  string           `json:"note,omitempty"`
	Share float64          `json:"share,omitempty"`
	Inner *struct{ N int } `json:"inner,omitempty"`
	Tags  []string         `json:"tags,omitempty"`
	Flag  *bool            `json:"flag,omitempty"`
}

func testContract(t *testing.T, whole bool, fence FencePolicy) *Contract {
	t.Helper()
	c, err := Compile(Spec{Doc: "test", Schema: []byte(testSchema), Fence: fence, WholeLiterals: whole,
		Hints:        map[string]string{"lable": "unknown field (the contract spells it label)"},
		Reasons:      map[string]string{"note pattern": "must say something"},
		LateRequired: []string{"claim"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSentRequiresEveryProperty: what the model is sent asks for every property, at every
// level, in the order written, and leaves out $schema.
func TestSentRequiresEveryProperty(t *testing.T) {
	t.Parallel()
	var sent struct {
		Schema     *string  `json:"$schema"`
		Required   []string `json:"required"`
		Properties struct {
			Inner struct{ Required []string } `json:"inner"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(testContract(t, true, FenceTolerated).Sent(), &sent); err != nil {
		t.Fatal(err)
	}
	if want := []string{"label", "score", "claim", "note", "share", "inner", "tags", "flag"}; !slices.Equal(sent.Required, want) {
		t.Errorf("required %v, want %v", sent.Required, want)
	}
	if !slices.Equal(sent.Properties.Inner.Required, []string{"n"}) || sent.Schema != nil {
		t.Errorf("sent %+v", sent)
	}
}

func fieldsOf(err error) []string {
	var inv *Invalid
	if !errors.As(err, &inv) {
		return nil
	}
	var out []string
	for _, f := range inv.Fields {
		out = append(out, f.Field)
	}
	return out
}

// TestViolationsInReportOrder: unknown keys first in document order, then missing and
// mistyped fields, then wrong values, each in the schema's field order; a field once.
func TestViolationsInReportOrder(t *testing.T) {
	t.Parallel()
	c := testContract(t, true, FenceTolerated)
	var a testAnswer
	err := c.Decode([]byte(`{"note":"   ","zz":1,"lable":"yes","share":2,"inner":{"n":0,"x":1},"score":"7"}`), &a)
	want := []string{"zz", "lable", "inner.x", "label", "score", "note", "share", "inner.n"}
	if got := fieldsOf(err); !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v (%v)", got, want, err)
	}
	for _, s := range []string{
		"test: field lable: unknown field (the contract spells it label)",
		"test: field label: missing",
		`test: field score = "7": must be a whole number from 0 to 10`,
		`test: field note = "   ": must say something`,
		"test: field share = 2: must be a number in [0,1]",
		"test: field inner.n = 0: must be a whole number >= 1",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q:\n%v", s, err)
		}
	}
	if a.Label != "" || a.Score != 0 {
		t.Errorf("a wrong shape decoded into %+v", a)
	}
}

// TestValueErrorsStillDecode: with the shape right, the answer is decoded beside its
// violations, for the record.
func TestValueErrorsStillDecode(t *testing.T) {
	t.Parallel()
	c := testContract(t, true, FenceTolerated)
	var a testAnswer
	err := c.Decode([]byte(`{"label":"maybe","score":11,"note":"too long for it","tags":["abcd"],"flag":null}`), &a)
	if got, want := fieldsOf(err), []string{"label", "score", "note", "tags[0]"}; !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v (%v)", got, want, err)
	}
	if !strings.Contains(err.Error(), `note = "too long for it": must be at most 5 characters, not 15`) ||
		!strings.Contains(err.Error(), `label = "maybe": must be "yes" or "no"`) {
		t.Errorf("error %v", err)
	}
	if a.Label != "maybe" || a.Score != 11 {
		t.Errorf("decoded %+v", a)
	}
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Field != "label" || First(err) != error(fe) {
		t.Errorf("errors.As finds %v, First %v", fe, First(err))
	}
}

// TestWholeLiterals: with WholeLiterals a whole number written as 7.0 or 7e0 is refused as
// a fraction; without, it is the number it spells.
func TestWholeLiterals(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`7.0`, `7e0`, `7.5`, `70E-1`} {
		var a testAnswer
		err := testContract(t, true, FenceTolerated).Decode([]byte(`{"label":"yes","score":`+in+`}`), &a)
		if got := fieldsOf(err); !slices.Equal(got, []string{"score"}) || !strings.Contains(err.Error(), "not a fraction") {
			t.Errorf("%s: %v", in, err)
		}
	}
	var a testAnswer
	if err := testContract(t, false, FenceTolerated).Decode([]byte(`{"label":"yes","score":70E-1,"inner":{"n":2.0}}`), &a); err != nil || a.Score != 7 || a.Inner.N != 2 {
		t.Errorf("integral spellings: %+v, %v", a, err)
	}
	if err := testContract(t, false, FenceTolerated).Decode([]byte(`{"label":"yes","score":7.5}`), &a); !slices.Equal(fieldsOf(err), []string{"score"}) {
		t.Errorf("7.5 without WholeLiterals: %v", err)
	}
}

// TestSyntaxAndDuplicates: text that is not one object is ErrNotObject, Refused, in the
// words of the spec's document; a
// repeated key is a violation naming its path; the fence policy holds.
func TestSyntaxAndDuplicates(t *testing.T) {
	t.Parallel()
	ok := `{"label":"yes","score":1}`
	tolerant, refusing := testContract(t, true, FenceTolerated), testContract(t, true, FenceRefused)
	var a testAnswer
	for _, in := range []string{"", "[1]", ok + " thanks", "```yaml\n" + ok + "\n```", `{"label":`} {
		err := tolerant.Decode([]byte(in), &a)
		if !errors.Is(err, ErrNotObject) || !errors.Is(err, errclass.Refused) || !strings.HasPrefix(err.Error(), "test: not a single JSON object: ") {
			t.Errorf("%q: %v", in, err)
		}
	}
	if err := tolerant.Decode([]byte("```json\n"+ok+"\n```"), &a); err != nil {
		t.Errorf("fenced: %v", err)
	}
	if err := refusing.Decode([]byte("```json\n"+ok+"\n```"), &a); !errors.Is(err, ErrNotObject) || !strings.Contains(err.Error(), "code fence") {
		t.Errorf("fence refused: %v", err)
	}
	err := tolerant.Decode([]byte(`{"label":"yes","score":1,"inner":{"n":1,"n":2}}`), &a)
	if got := fieldsOf(err); !slices.Equal(got, []string{"inner.n"}) || !strings.Contains(err.Error(), "duplicate field") {
		t.Errorf("duplicate: %v", err)
	}
}

// TestLateRequired: a late field's absence is reported after every other violation, and
// Validate lets a recorded value lack it.
func TestLateRequired(t *testing.T) {
	t.Parallel()
	c, err := Compile(Spec{Doc: "test", Schema: []byte(strings.Replace(testSchema, `"required": ["label", "score"]`, `"required": ["claim", "label", "score"]`, 1)),
		LateRequired: []string{"claim"}})
	if err != nil {
		t.Fatal(err)
	}
	var a testAnswer
	if got := fieldsOf(c.Decode([]byte(`{"score":11}`), &a)); !slices.Equal(got, []string{"label", "score", "claim"}) {
		t.Errorf("fields %v", got)
	}
	if err := c.Validate(testAnswer{Label: "no", Score: 3}); err != nil {
		t.Errorf("a recorded value without the late field: %v", err)
	}
}

// TestValidateValues: a Go value is held to the same schema; a NaN is named by its field.
func TestValidateValues(t *testing.T) {
	t.Parallel()
	c := testContract(t, true, FenceTolerated)
	if err := c.Validate(testAnswer{Label: "yes", Score: 4, Note: "ok"}); err != nil {
		t.Fatal(err)
	}
	if got := fieldsOf(c.Validate(testAnswer{Label: "yes", Score: 4, Share: 1.5})); !slices.Equal(got, []string{"share"}) {
		t.Errorf("share 1.5: %v", got)
	}
	err := c.Validate(testAnswer{Label: "yes", Score: 4, Share: math.NaN()})
	if got := fieldsOf(err); !slices.Equal(got, []string{"share"}) || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN: %v", err)
	}
}

// TestDecodeEdited: the caller's fields replace the model's before the check.
func TestDecodeEdited(t *testing.T) {
	t.Parallel()
	c := testContract(t, true, FenceTolerated)
	var a testAnswer
	err := c.DecodeEdited([]byte(`{"label":"yes","score":"ten"}`), func(o Members) Members { return o.Set("score", json.Number("3")) }, &a)
	if err != nil || a.Score != 3 {
		t.Fatalf("%+v %v", a, err)
	}
}

// TestTreeOfIsWhatJSONWrites: the tree Validate builds from a value is the one
// encoding/json's text of it decodes to.
func TestTreeOfIsWhatJSONWrites(t *testing.T) {
	t.Parallel()
	claim, flag := 3, false
	for _, v := range []any{
		testAnswer{}, testAnswer{Label: "yes", Score: -4, Claim: &claim, Note: "<a & b>", Share: 1e-7, Tags: []string{}, Flag: &flag},
		&testAnswer{Share: 1e21, Inner: &struct{ N int }{N: 2}}, testAnswer{Share: 0.72, Tags: []string{"x", "y"}},
		map[string]any{"b": 1.5, "a": []any{nil, true, "s", float32(0.1)}, "c": map[string]int{"z": 1, "y": 2}},
	} {
		got, ok := treeOf(reflect.ValueOf(v))
		text, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeTree(text, true)
		if !ok || err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: treeOf %#v (%v), want %#v (%v)", text, got, ok, want, err)
		}
	}
}
